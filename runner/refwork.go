package runner

import (
	"crypto/sha256"
	"encoding/binary"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// refWork does a fixed piece of work — 1024 chained SHA-256 hashes of a
// 4 KiB block that stays in the core's cache, a few milliseconds of one
// core — and returns the CPU time it took on this thread, or false where
// the thread's CPU time cannot be read. Being CPU time, not wall time, it
// does not count waiting for a core; and touching no memory beyond its
// block, it does not count the run's own cache misses either. It grows
// when the machine does the same computation slower: a core shared with
// other work on the host, a lower clock.
func refWork() (time.Duration, bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, ok := threadCPU()
	if !ok {
		return 0, false
	}
	var block [4096]byte
	var sum [32]byte
	for i := range 1024 {
		binary.LittleEndian.PutUint64(block[:], uint64(i))
		sum = sha256.Sum256(block[:])
		copy(block[8:], sum[:])
	}
	after, ok := threadCPU()
	refSink = sum[0]
	if ok && after >= before {
		refCPU.Add(int64(after - before))
	}
	return after - before, ok && after >= before
}

// refCPU is the CPU time (ns) this process spent in refWork so far: the
// drift sampler's yardstick, not load, so the CPU sampler takes it out of
// the harness's CPU (refCPUSource).
var refCPU atomic.Int64

// refCPUSource is the CPU sampler's source of refCPU.
const refCPUSource = "refwork"

// refCPUReading reads refCPU as a CPU source.
func refCPUReading() (cpuReading, bool) {
	return cpuReading{cpu: time.Duration(refCPU.Load()), at: time.Now(), id: os.Getpid()}, true
}

// refSink keeps the compiler from dropping the hashes.
var refSink byte

// threadCPU is the calling thread's CPU time, to the nanosecond
// (CLOCK_THREAD_CPUTIME_ID; getrusage counts in scheduler ticks, too coarse
// for a few milliseconds).
func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
