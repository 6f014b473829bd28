// Package bench holds writeout's benchmarks across media, baselines and other libraries. The
// figures and the commands that made them are in RESULTS.md beside this file; internal/gen has the
// seeded data generators that benchmarks, tests and the CLI share.
package bench
