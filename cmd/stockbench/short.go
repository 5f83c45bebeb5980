package main

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/stockbench/stockbench/faults"
)

// shortEnv names the environment variable that shortens every run for the
// docs-examples test (docs/running.md, "Shortened runs"): with it set to 1
// a documented command runs as written, only smaller.
const shortEnv = "STOCKBENCH_EXAMPLE_SHORT"

// Caps of a shortened run. A run asking for less keeps its own figure.
const (
	shortDuration  = time.Second
	shortWarmup    = 200 * time.Millisecond
	shortCalibrate = 200 * time.Millisecond
	shortBuyers    = 32
	shortRepeat    = 1
	shortStrats    = 3
	shortValues    = 2
	// shortFaultTail is how long a shortened measured phase runs past the
	// end of its last fault, so every fault still falls inside it.
	shortFaultTail = time.Second
)

// shortAll is what --strategies all means in a shortened run: one strategy
// of each family (MySQL row lock, Redis Lua, and the unsafe baseline).
const shortAll = "rowlock,lua-tcc,naive"

// shortened reports whether STOCKBENCH_EXAMPLE_SHORT=1 is set.
func shortened() bool { return os.Getenv(shortEnv) == "1" }

// shorten caps, when STOCKBENCH_EXAMPLE_SHORT=1, the figures that make a
// run long: the measured phase (never before its last fault ends), the
// warm-up, the calibration probes, the buyers, the repeats, and the
// strategies ("all" is one of each family; a longer list keeps its first
// three). It changes the values only, not which flags count as set,
// so every check on the flags as written still applies.
func (f *runFlags) shorten() {
	if !shortened() {
		return
	}
	if f.strategies == "all" {
		f.strategies = shortAll
	}
	if list := strings.Split(f.strategies, ","); len(list) > shortStrats {
		f.strategies = strings.Join(list[:shortStrats], ",")
	}
	end := time.Duration(0)
	if plan, err := faults.ParsePlan(f.faults); err == nil {
		for _, ft := range plan {
			end = max(end, ft.End())
		}
	}
	f.duration = min(f.duration, max(shortDuration, end+shortFaultTail))
	f.warmup = min(f.warmup, shortWarmup)
	f.calibrate = min(f.calibrate, shortCalibrate)
	f.buyers = min(f.buyers, shortBuyers)
	f.repeat = min(f.repeat, shortRepeat)
}

// shortenValues keeps, in a shortened run, the first few values of a
// sweep or offered loads of a curve.
func shortenValues(values []string) []string {
	if shortened() && len(values) > shortValues {
		return values[:shortValues]
	}
	return values
}

// shortNote is the line a shortened run prints on stderr, so its figures
// are never taken for a full run's.
func shortNote() string {
	return "stockbench: " + shortEnv + "=1: shortened run (measured phase ≤ " + shortDuration.String() +
		", warm-up ≤ " + shortWarmup.String() + ", buyers ≤ " + strconv.Itoa(shortBuyers) + ", repeats ≤ " + strconv.Itoa(shortRepeat) +
		", strategies ≤ " + strconv.Itoa(shortStrats) + ", all = " + strings.ReplaceAll(shortAll, ",", " ") +
		", sweep values and curve rates ≤ " + strconv.Itoa(shortValues) + ")"
}
