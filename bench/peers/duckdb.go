package peers

import (
	"context"
	"database/sql"
	"errors"
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

// DuckDBOptions configure OpenDuckDBWith. The zero value is OpenDuckDB's database: Threads
// threads, DuckDB's own memory limit (80% of the machine's memory) and temp directory (".tmp"
// in the working directory, for an in-memory database).
type DuckDBOptions struct {
	// MemoryLimit is DuckDB's memory_limit ("4GB", "512MiB"); "" leaves DuckDB's default.
	MemoryLimit string
	// TempDirectory is where DuckDB spills what does not fit in MemoryLimit (temp_directory);
	// "" leaves DuckDB's default.
	TempDirectory string
}

// OpenDuckDB opens an in-memory DuckDB with SET threads=Threads.
func OpenDuckDB() (*DuckDB, error) { return OpenDuckDBWith(DuckDBOptions{}) }

// OpenDuckDBWith opens an in-memory DuckDB with SET threads=Threads and the SETs of o.
func OpenDuckDBWith(o DuckDBOptions) (*DuckDB, error) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, err
	}
	// One connection, so that the SETs apply to every statement.
	db.SetMaxOpenConns(1)
	sets := []string{fmt.Sprintf("SET threads=%d", Threads)}
	if o.MemoryLimit != "" {
		sets = append(sets, "SET memory_limit="+quote(o.MemoryLimit))
	}
	if o.TempDirectory != "" {
		sets = append(sets, "SET temp_directory="+quote(o.TempDirectory))
	}
	for _, s := range sets {
		if _, err := db.Exec(s); err != nil {
			return nil, errors.Join(fmt.Errorf("peers: duckdb: %s: %w", s, err), db.Close())
		}
	}
	return &DuckDB{db: db}, nil
}

// Close closes the database.
func (d *DuckDB) Close() error { return d.db.Close() }

// Setting returns the current value of one of DuckDB's settings (current_setting).
func (d *DuckDB) Setting(ctx context.Context, name string) (string, error) {
	var v string
	if err := d.db.QueryRowContext(ctx, "SELECT current_setting("+quote(name)+")::VARCHAR").Scan(&v); err != nil {
		return "", fmt.Errorf("peers: duckdb: setting %s: %w", name, err)
	}
	return v, nil
}

func fileList(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = "'" + strings.ReplaceAll(p, "'", "''") + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func quote(p string) string { return "'" + strings.ReplaceAll(p, "'", "''") + "'" }

// MergeSQL is Events.MergeSQL.
func MergeSQL(paths []string, dst string) string { return Events.MergeSQL(paths, dst) }

// RollupSQL is Events.RollupSQL.
func RollupSQL(paths []string, dst string) string { return Events.RollupSQL(paths, dst) }

// MergeSQL is the statement of the merge job: every row, ordered by (time, dimensions), into
// a zstd Parquet file.
func (s *Shape) MergeSQL(paths []string, dst string) string {
	return fmt.Sprintf("COPY (SELECT * FROM read_parquet(%s) ORDER BY time, %s) TO %s (FORMAT parquet, COMPRESSION zstd)",
		fileList(paths), strings.Join(s.Dims, ", "), quote(dst))
}

// RollupSQL is the statement of the rollup-hour job: time truncated to the hour (kept as epoch
// milliseconds, as writeout's), grouped by (hour, RollupDims), the metrics summed (cast back to
// BIGINT from DuckDB's HUGEINT sums), ordered by the group.
func (s *Shape) RollupSQL(paths []string, dst string) string {
	sums := make([]string, len(s.Metrics))
	for i, m := range s.Metrics {
		sums[i] = fmt.Sprintf("sum(%s)::BIGINT AS %s", m, m)
	}
	return fmt.Sprintf("COPY (SELECT epoch_ms(date_trunc('hour', epoch_ms(time))) AS time, %s, "+
		"%s FROM read_parquet(%s) "+
		"GROUP BY ALL ORDER BY ALL) TO %s (FORMAT parquet, COMPRESSION zstd)",
		strings.Join(s.RollupDims, ", "), strings.Join(sums, ", "), fileList(paths), quote(dst))
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

// ColumnSize is one column of a Parquet file as DuckDB's parquet_metadata() reports it,
// summed over the row groups.
type ColumnSize struct {
	Column       string // path_in_schema
	Compressed   int64  // total_compressed_size: the bytes of its pages in the file
	Uncompressed int64  // total_uncompressed_size
	Encodings    string // the distinct encodings of its chunks
	Compression  string // the distinct codecs of its chunks
	RowGroups    int
}

// ColumnSizes returns the columns of the Parquet file at path in file order, with their sizes
// (parquet_metadata()), to compare a segment's parts with.
func (d *DuckDB) ColumnSizes(ctx context.Context, path string) (_ []ColumnSize, err error) {
	rows, err := d.db.QueryContext(ctx, "SELECT path_in_schema, sum(total_compressed_size)::BIGINT, sum(total_uncompressed_size)::BIGINT, "+
		"string_agg(DISTINCT encodings, ';'), string_agg(DISTINCT compression, ';'), count(DISTINCT row_group_id)::BIGINT "+
		"FROM parquet_metadata("+quote(path)+") GROUP BY path_in_schema ORDER BY min(column_id)")
	if err != nil {
		return nil, fmt.Errorf("peers: duckdb: parquet_metadata %s: %w", path, err)
	}
	defer func() { err = errors.Join(err, rows.Close()) }()
	var out []ColumnSize
	for rows.Next() {
		var c ColumnSize
		if err := rows.Scan(&c.Column, &c.Compressed, &c.Uncompressed, &c.Encodings, &c.Compression, &c.RowGroups); err != nil {
			return nil, fmt.Errorf("peers: duckdb: parquet_metadata %s: %w", path, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("peers: duckdb: parquet_metadata %s: %w", path, err)
	}
	return out, nil
}
