package peers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger"
)

// peersGolden are the SHA-256 digests of what commit 8008307 wrote for the peers' merges of
// 3,000,000 events: the inputs (segments written from Generate's events), the contiguous and
// overlapping merges, and the hour rollup, each with the default compression and with zstd.
var peersGolden = map[string]string{
	"contiguous/input-0":              "cd4b1c71ff555167881aa09c5c672bcd9a569463bd30b9e96f66a74f040882c9",
	"contiguous/input-1":              "6ca0aad7283e4bd8b68021f91e49722eda50c4a1e88eaa2b29580082fc5a54fd",
	"contiguous/input-2":              "022b0c24a8078a5f44a133559fcb95e7ace5d13c308a87554625c2c1371cb269",
	"contiguous/input-3":              "1e4e31cb2e65dbada9bb895d59e64f507354329bff72c8dd8fb9a73a056e1b60",
	"contiguous/input-4":              "570820034a95de997f7ae7da741a41d8378b1c21a3463aeb6cfe008f6e3d8dd7",
	"contiguous/merge/default":        "fa44f901ec68f2fa1cf8973bb8dfe9cbff81eca42250aead777897f2e2889b01",
	"contiguous/merge/zstd":           "be324e586f36a107bd46e98f046d352233af915fe63ecf9bb9ee41b464a32b44",
	"contiguous/rollup-hour/default":  "484c90d66e9caec390700d85b7f11edf8a6bb8adaf6cedb46c44883fb1226f2b",
	"contiguous/rollup-hour/zstd":     "629c0e11709988158563b49f29f4bcca58f71588e912d2fd80d847eae501e30c",
	"overlapping/input-0":             "3c87af232e003ed62ec51faadc97ac77502e202d5cfb643f11c141e6e385981c",
	"overlapping/input-1":             "ecc75a61879901743475b92b853a58b239cc1e06e03688accd44a695d23875ac",
	"overlapping/input-2":             "e975c60ccc3464dcc3b6ee3432a35853770ece5cdf53ce74ac306f47360e5e4d",
	"overlapping/input-3":             "475c368abfdde653a1e0c738131c6d624a03321d63f864952888d4c8cda41cb0",
	"overlapping/input-4":             "df03339195b06fbd75c8cac4257a556ca9292893bb1cb4f84a35cb3473c074ec",
	"overlapping/merge/default":       "fa44f901ec68f2fa1cf8973bb8dfe9cbff81eca42250aead777897f2e2889b01",
	"overlapping/merge/zstd":          "be324e586f36a107bd46e98f046d352233af915fe63ecf9bb9ee41b464a32b44",
	"overlapping/rollup-hour/default": "484c90d66e9caec390700d85b7f11edf8a6bb8adaf6cedb46c44883fb1226f2b",
	"overlapping/rollup-hour/zstd":    "629c0e11709988158563b49f29f4bcca58f71588e912d2fd80d847eae501e30c",
}

// TestGoldenBytes requires the peers' inputs and merges to hold the bytes 8008307 wrote. It
// runs when WRITEOUT_PEERS_GOLDEN is set (it writes about 1 GB under a temp dir);
// WRITEOUT_PEERS_GOLDEN=print prints the table the tree writes.
func TestGoldenBytes(t *testing.T) {
	mode := os.Getenv("WRITEOUT_PEERS_GOLDEN")
	if mode == "" {
		t.Skip("set WRITEOUT_PEERS_GOLDEN=1 to run")
	}
	dir := t.TempDir()
	got := map[string]string{}
	sum := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		return hex.EncodeToString(h[:])
	}
	ev := Generate(3_000_000)
	ctx := context.Background()
	for _, layout := range []Layout{Contiguous, Overlapping} {
		parts, err := Split(ev, layout)
		if err != nil {
			t.Fatal(err)
		}
		fx := FixturePaths(dir, layout)
		for i, p := range parts {
			if _, err := WriteSegment(fx.Segs[i], p); err != nil {
				t.Fatal(err)
			}
			got[fmt.Sprintf("%s/input-%d", layout, i)] = sum(fx.Segs[i])
		}
		for _, comp := range []columns.Compression{columns.CompressionDefault, columns.CompressionZstd} {
			for name, run := range map[string]func(context.Context, []string, string, columns.Compression) (merger.Result, error){
				"merge": WriteoutMerge, "rollup-hour": WriteoutRollupHour,
			} {
				dst := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.seg", layout, name, comp))
				if _, err := run(ctx, fx.Segs, dst, comp); err != nil {
					t.Fatal(err)
				}
				got[fmt.Sprintf("%s/%s/%s", layout, name, comp)] = sum(dst)
				if err := os.Remove(dst); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if mode == "print" {
		for k, v := range got {
			fmt.Printf("\t%q: %q,\n", k, v)
		}
		return
	}
	if len(got) != len(peersGolden) {
		t.Fatalf("%d outputs, the table has %d", len(got), len(peersGolden))
	}
	for k, v := range peersGolden {
		if got[k] != v {
			t.Errorf("%s: sha256 %s, 8008307 wrote %s", k, got[k], v)
		}
	}
}

// TestGoldenStreamed requires the inputs Prepare streams for 3,000,000 events (in buckets of
// 262,144 rows, segments in runs of 262,144 and 52,428 rows merged 8 at a time) to hold the bytes of peersGolden's inputs.
// It runs when WRITEOUT_PEERS_GOLDEN is set.
func TestGoldenStreamed(t *testing.T) {
	if os.Getenv("WRITEOUT_PEERS_GOLDEN") == "" {
		t.Skip("set WRITEOUT_PEERS_GOLDEN=1 to run")
	}
	dir := t.TempDir()
	if _, err := Prepare(dir, PrepareOptions{Rows: 3_000_000, NoCSV: true, BatchRows: 1 << 18, RunRows: 1 << 18, MaxRuns: 8}); err != nil {
		t.Fatal(err)
	}
	for _, layout := range []Layout{Contiguous, Overlapping} {
		fx := FixturePaths(dir, layout)
		for i, p := range fx.Segs {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.Sum256(b)
			k := fmt.Sprintf("%s/input-%d", layout, i)
			if got := hex.EncodeToString(h[:]); got != peersGolden[k] {
				t.Errorf("%s: sha256 %s, 8008307 wrote %s", k, got, peersGolden[k])
			}
		}
	}
}
