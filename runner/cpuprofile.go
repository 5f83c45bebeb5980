package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// cpuProfileEnv names a directory: when set, the harness writes a CPU
// profile of itself over each run's load phase (warm-up and measured
// phase), one file per run, to see where the harness's CPU per flow goes.
// (STOCKBENCH_CPUPROFILE=FILE, in cmd/stockbench, profiles the whole
// process instead; the two cannot run at once.)
const cpuProfileEnv = "STOCKBENCH_CPUPROFILE_DIR"

// startCPUProfile starts DIR/cpu-NN-STRATEGY.prof when
// STOCKBENCH_CPUPROFILE_DIR=DIR (numbered with the heap profiles, so the runs
// of one process keep their order); the returned func stops it. A
// failure is one line on stderr, never the run's.
func startCPUProfile(strategy string) (stop func()) {
	dir := os.Getenv(cpuProfileEnv)
	if dir == "" {
		return func() {}
	}
	name := fmt.Sprintf("cpu-%02d-%s.prof", heapProfiles.Add(1), strategy)
	f, err := os.Create(filepath.Join(dir, name))
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "stockbench: %s: %v\n", cpuProfileEnv, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "stockbench: %s: %v\n", cpuProfileEnv, err)
		}
	}
}
