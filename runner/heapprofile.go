package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
)

// heapProfileEnv names a directory: when set, the harness writes a heap
// profile of itself at the end of each phase (after a GC, so in-use space
// is what is live then), to see what it holds per SKU.
const heapProfileEnv = "STOCKBENCH_HEAPPROFILE"

// heapProfiles numbers the profiles of one process, so the phases of
// several runs keep their order and never overwrite each other.
var heapProfiles atomic.Int64

// writeHeapProfile writes DIR/heap-NN-STRATEGY-PHASE.prof when
// STOCKBENCH_HEAPPROFILE=DIR and one line on stderr with the heap and the
// resident memory then; a failure is one line on stderr, never the run's.
func writeHeapProfile(strategy, phase string) {
	dir := os.Getenv(heapProfileEnv)
	if dir == "" {
		return
	}
	runtime.GC()
	name := fmt.Sprintf("heap-%02d-%s-%s.prof", heapProfiles.Add(1), strategy, phase)
	f, err := os.Create(filepath.Join(dir, name))
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "stockbench: %s: %v\n", heapProfileEnv, err)
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(os.Stderr, "stockbench: %s: heap in use %.1f MB, heap sys %.1f MB, RSS %.1f MB, peak RSS %.1f MB\n",
		name, float64(ms.HeapInuse)/(1<<20), float64(ms.HeapSys)/(1<<20), rssMB(), peakRSSMB())
}
