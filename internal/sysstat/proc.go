// Package sysstat reads the machine and the stores: a process's memory
// and CPU time from /proc, the machine's CPU time by kind, Redis's INFO
// and MySQL's SHOW GLOBAL STATUS. Each reader has a pure parser beside it,
// so the parsing is tested on text and the reading on real servers.
package sysstat

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// ClockTicks is USER_HZ, 100 on every Linux platform Go supports: the unit
// of /proc's CPU times.
const ClockTicks = 100

// ParseStatus reads the "N kB" fields of a /proc/PID/status text (VmRSS,
// VmHWM, …), in bytes; fields of another shape are left out.
func ParseStatus(text string) map[string]int64 {
	out := map[string]int64{}
	for _, line := range strings.Split(text, "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			out[name] = n << 10
		}
	}
	return out
}

// ProcMem reads a process's resident memory now (VmRSS) and its peak
// (VmHWM) in bytes from /proc/PID/status ("self" for this process); 0, 0
// where the kernel does not report them.
func ProcMem(pid string) (rss, peak int64) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, 0
	}
	m := ParseStatus(string(b))
	return m["VmRSS"], m["VmHWM"]
}

// ResetPeak asks the kernel to restart this process's peak resident
// memory count (writing 5 to /proc/self/clear_refs); false when it could
// not.
func ResetPeak() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// ParseStatTicks reads utime+stime (in ClockTicks) of a /proc/PID/stat
// text; false for a text of another shape.
func ParseStatTicks(stat string) (int64, bool) {
	// The command name may hold spaces; fields resume after its ')'.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return u + s, true
}

// ProcTicks reads utime+stime of a process from /proc/PID/stat.
func ProcTicks(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return ParseStatTicks(string(b))
}

// CPUTimes is the machine's CPU time by kind since boot, in seconds
// summed over its cores (/proc/stat's "cpu" line).
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal float64
}

// ParseMachineCPU reads /proc/stat's first line, "cpu user nice system
// idle iowait irq softirq steal [guest guest_nice]", in USER_HZ ticks.
// Guest time is already in user and nice, so it is not read; false for a
// line of another shape.
func ParseMachineCPU(line string) (CPUTimes, bool) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return CPUTimes{}, false
	}
	var t [8]float64
	for i := range t {
		v, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return CPUTimes{}, false
		}
		t[i] = float64(v) / ClockTicks
	}
	return CPUTimes{User: t[0], Nice: t[1], System: t[2], Idle: t[3], IOWait: t[4], IRQ: t[5], SoftIRQ: t[6], Steal: t[7]}, true
}

// MachineCPU reads the machine's CPU time by kind from /proc/stat; false
// where it cannot.
func MachineCPU() (CPUTimes, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return ParseMachineCPU(line)
}

// ParseLoadAverage is the first three fields of /proc/loadavg (the 1, 5
// and 15 minute load averages), as written; "" for a text of another
// shape.
func ParseLoadAverage(text string) string {
	f := strings.Fields(text)
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// LoadAverage is the machine's load averages now ("" where /proc/loadavg
// cannot be read).
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return ParseLoadAverage(string(b))
}

// ParseCPUModel is the first "model name" of a /proc/cpuinfo text; "" when
// there is none (some architectures name the CPU otherwise).
func ParseCPUModel(text string) string {
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// CPUModel is the machine's CPU model from /proc/cpuinfo ("" where it
// cannot be read or names none).
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	return ParseCPUModel(string(b))
}

// ParseSchedstat reads a /proc/PID/task/TID/schedstat text, "run_ns
// wait_ns timeslices": the time the thread ran and the time it waited on a
// run queue for a core; false for a text of another shape.
func ParseSchedstat(text string) (run, wait time.Duration, ok bool) {
	f := strings.Fields(text)
	if len(f) < 2 {
		return 0, 0, false
	}
	r, err1 := strconv.ParseInt(f[0], 10, 64)
	w, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return time.Duration(r), time.Duration(w), true
}

// ProcRunQueueWait is the time a process's live threads have waited on a
// run queue for a core, summed (/proc/PID/task/*/schedstat; a thread that
// has ended takes its wait with it). false when the process is gone or
// the kernel keeps no schedstats.
func ProcRunQueueWait(pid int) (time.Duration, bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var sum time.Duration
	seen := false
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended since the listing
		}
		if _, w, ok := ParseSchedstat(string(b)); ok {
			sum += w
			seen = true
		}
	}
	return sum, seen
}

// ParseCPUPressure reads the "some" line's total of a /proc/pressure/cpu
// text (PSI): the time in which at least one runnable task waited for a
// core, in microseconds since boot; false without it.
func ParseCPUPressure(text string) (time.Duration, bool) {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "some" {
			continue
		}
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "total="); ok {
				us, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, false
				}
				return time.Duration(us) * time.Microsecond, true
			}
		}
	}
	return 0, false
}

// CPUPressure reads the machine's CPU pressure total (ParseCPUPressure);
// false on a kernel without PSI.
func CPUPressure() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0, false
	}
	return ParseCPUPressure(string(b))
}
