package peers

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	_ "github.com/duckdb/duckdb-go/v2" // the "duckdb" database/sql driver
)

// DuckDB is an in-memory DuckDB limited to Threads threads.
type DuckDB struct {
	db *sql.DB
}

// Threads is DuckDB's thread count: the machine's two cores.
const Threads = 2

// OpenDuckDB opens an in-memory DuckDB with SET threads=Threads.
func OpenDuckDB() (*DuckDB, error) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, err
	}
	// One connection, so that the SET applies to every statement.
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(fmt.Sprintf("SET threads=%d", Threads)); err != nil {
		db.Close()
		return nil, err
	}
	return &DuckDB{db: db}, nil
}

// Close closes the database.
func (d *DuckDB) Close() error { return d.db.Close() }

func fileList(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = "'" + strings.ReplaceAll(p, "'", "''") + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func quote(p string) string { return "'" + strings.ReplaceAll(p, "'", "''") + "'" }

// MergeSQL is the statement of the merge job.
func MergeSQL(paths []string, dst string) string {
	return fmt.Sprintf("COPY (SELECT * FROM read_parquet(%s) ORDER BY time, d1, d2, d3) TO %s (FORMAT parquet, COMPRESSION zstd)",
		fileList(paths), quote(dst))
}

// RollupSQL is the statement of the rollup-hour job: time truncated to the hour (kept as epoch
// milliseconds, as writeout's), grouped by (hour, d1, d2), m1..m3 summed (cast back to BIGINT
// from DuckDB's HUGEINT sums), ordered by the group.
func RollupSQL(paths []string, dst string) string {
	return fmt.Sprintf("COPY (SELECT epoch_ms(date_trunc('hour', epoch_ms(time))) AS time, d1, d2, "+
		"sum(m1)::BIGINT AS m1, sum(m2)::BIGINT AS m2, sum(m3)::BIGINT AS m3 FROM read_parquet(%s) "+
		"GROUP BY ALL ORDER BY ALL) TO %s (FORMAT parquet, COMPRESSION zstd)", fileList(paths), quote(dst))
}

// Exec runs one statement and returns the rows it affected (for COPY ... TO, the rows
// written).
func (d *DuckDB) Exec(ctx context.Context, stmt string) (int64, error) {
	res, err := d.db.ExecContext(ctx, stmt)
	if err != nil {
		return 0, fmt.Errorf("peers: duckdb: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("peers: duckdb: %w", err)
	}
	return n, nil
}
