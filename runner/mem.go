package runner

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// resetPeakRSS starts the process's peak-RSS count (VmHWM) afresh, so that
// a run's peak is its own and not an earlier run's in the same process
// (Linux: "5" to /proc/self/clear_refs). Best effort: where it fails, the
// peak is the process's since it started, which only overstates.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// procMem reads a process's resident memory now (VmRSS) and its peak
// (VmHWM) in bytes from /proc/PID/status ("self" for this process); 0, 0
// where the kernel does not report them.
func procMem(pid string) (rss, peak int64) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "VmRSS":
			dst = &rss
		case "VmHWM":
			dst = &peak
		default:
			continue
		}
		f := strings.Fields(val)
		if len(f) == 2 && f[1] == "kB" {
			if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				*dst = n << 10
			}
		}
	}
	return rss, peak
}
