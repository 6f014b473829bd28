#!/usr/bin/env python3
"""Helper of quantiles_check.sh: generates event rows and checks segtool's quantiles.

  quantiles_check.py gen ROWS SEED OUT.csv
      writes ROWS events as CSV: ts (epoch ms over 24 hours), svc (one of 30 services),
      latency (an integer of milliseconds, log-normal per service: a heavy tail), plus
      exact.json beside OUT.csv: per service, the sorted latencies' quantiles (lower:
      the value of rank floor(q*(n-1)), what DDSketch approximates).
  quantiles_check.py check EXACT.json QUERY.csv LABEL
      reads `segtool query --group-by svc --quantiles 0.5,0.9,0.99` output and prints, per
      quantile, the largest relative error against the exact values; exits 1 when one is over
      2% and over 1 unit.
"""
import csv
import json
import math
import random
import sys

QS = [0.5, 0.9, 0.99]


def name(q):
    s = ("%g" % (q * 100))
    return "p" + s


def gen(rows, seed, out):
    rng = random.Random(seed)
    svcs = ["svc%02d" % i for i in range(30)]
    params = {s: (rng.uniform(2.0, 5.0), rng.uniform(0.5, 1.4)) for s in svcs}
    per = {s: [] for s in svcs}
    t0 = 1_735_689_600_000  # 2025-01-01
    with open(out, "w", newline="") as f:
        w = f.write
        w("ts,svc,latency\n")
        buf = []
        for i in range(rows):
            s = svcs[min(int(rng.paretovariate(1.2)) - 1, 29)] if rng.random() < 0.5 else rng.choice(svcs)
            mu, sigma = params[s]
            v = int(math.exp(rng.gauss(mu, sigma)))
            per[s].append(v)
            buf.append("%d,%s,%d\n" % (t0 + rng.randrange(24 * 3_600_000), s, v))
            if len(buf) >= 100_000:
                w("".join(buf))
                buf = []
        w("".join(buf))
    exact = {}
    for s, vals in per.items():
        if not vals:
            continue
        vals.sort()
        n = len(vals)
        exact[s] = {"n": n, **{name(q): vals[int(q * (n - 1))] for q in QS}}
    with open(out.rsplit("/", 1)[0] + "/exact.json" if "/" in out else "exact.json", "w") as f:
        json.dump(exact, f, indent=1, sort_keys=True)


def check(exact_path, query_path, label):
    exact = json.load(open(exact_path))
    worst = {name(q): (0.0, None) for q in QS}
    groups = 0
    ok = True
    with open(query_path, newline="") as f:
        for row in csv.DictReader(f):
            s = row["svc"]
            e = exact[s]
            groups += 1
            for q in QS:
                col = "latency_q_" + name(q)
                got, want = float(row[col]), e[name(q)]
                err = abs(got - want) / want if want else abs(got - want)
                if err > worst[name(q)][0]:
                    worst[name(q)] = (err, "%s: %s exact %d, sketch %.4g" % (s, col, want, got))
                if err > 0.02 and abs(got - want) > 1:
                    ok = False
                    print("  OVER THE BAR: %s %s exact %d sketch %g" % (s, col, want, got))
            if int(row["latency_q"]) != e["n"]:
                ok = False
                print("  COUNT: %s sketch count %s, rows %d" % (s, row["latency_q"], e["n"]))
    assert groups == len(exact), (groups, len(exact))
    print("%s: %d groups" % (label, groups))
    print("  quantile  max relative error  (worst group)")
    for q in QS:
        err, where = worst[name(q)]
        print("  %-8s  %8.4f%%            %s" % (name(q), 100 * err, where))
    return ok


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1] == "check":
        sys.exit(0 if check(sys.argv[2], sys.argv[3], sys.argv[4]) else 1)
    else:
        sys.exit(__doc__)
