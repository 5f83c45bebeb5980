package runner

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

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
