package sysstat

import (
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// TestParseStatus: the kB fields of /proc/PID/status, in bytes; other
// shapes left out.
func TestParseStatus(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       map[string]int64
	}{
		{"rss and peak", "Name:\tgo\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\nThreads:\t7\n",
			map[string]int64{"VmHWM": 2 << 20, "VmRSS": 1 << 20}},
		{"no unit", "VmRSS:\t1024\n", map[string]int64{}},
		{"another unit", "VmRSS:\t1024 MB\n", map[string]int64{}},
		{"not a number", "VmRSS:\tx kB\n", map[string]int64{}},
		{"empty", "", map[string]int64{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ParseStatus(c.text); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParseStatus(%q) = %v, want %v", c.text, got, c.want)
			}
		})
	}
}

// TestParseStatTicks: utime+stime of /proc/PID/stat, a command name with
// spaces and parentheses included.
func TestParseStatTicks(t *testing.T) {
	tail := " S 1 2 3 4 5 6 7 8 9 10 250 50 0 0"
	for _, c := range []struct {
		name, stat string
		want       int64
		ok         bool
	}{
		{"plain", "42 (mariadbd)" + tail, 300, true},
		{"spaces and parentheses in the name", "42 (a (b) c)" + tail, 300, true},
		{"no name", "42 mariadbd" + tail, 0, false},
		{"too short", "42 (x) S 1 2 3", 0, false},
		{"not a number", "42 (x) S 1 2 3 4 5 6 7 8 9 10 u 50", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ParseStatTicks(c.stat)
			if got != c.want || ok != c.ok {
				t.Fatalf("ParseStatTicks(%q) = %d, %v; want %d, %v", c.stat, got, ok, c.want, c.ok)
			}
		})
	}
}

// TestParseMachineCPU: /proc/stat's first line read by kind, guest time
// not read, other shapes refused.
func TestParseMachineCPU(t *testing.T) {
	all := CPUTimes{User: 5, Nice: 1, System: 2, Idle: 10, IOWait: 0.5, IRQ: 0.1, SoftIRQ: 0.4, Steal: 1}
	for _, c := range []struct {
		name, line string
		want       CPUTimes
		ok         bool
	}{
		{"every field", "cpu  500 100 200 1000 50 10 40 100 30 0", all, true},
		{"no guest fields", "cpu 500 100 200 1000 50 10 40 100", all, true},
		{"a core's line, not the machine's", "cpu0 500 100 200 1000 50 10 40 100", CPUTimes{}, false},
		{"too short", "cpu 500 100 200 1000", CPUTimes{}, false},
		{"not a number", "cpu 500 x 200 1000 50 10 40 100", CPUTimes{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ParseMachineCPU(c.line)
			if got != c.want || ok != c.ok {
				t.Fatalf("ParseMachineCPU(%q) = %+v, %v; want %+v, %v", c.line, got, ok, c.want, c.ok)
			}
		})
	}
}

// TestParseInfo: the numeric fields of an INFO reply as Redis 7 writes it
// (CRLF, section headers, text fields).
func TestParseInfo(t *testing.T) {
	for _, c := range []struct {
		name, info string
		want       map[string]float64
	}{
		{"memory", "# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\n\r\n",
			map[string]float64{"used_memory": 1 << 20}},
		{"cpu", "# CPU\r\nused_cpu_sys:10.5\r\nused_cpu_user_main_thread:0.75\r\n",
			map[string]float64{"used_cpu_sys": 10.5, "used_cpu_user_main_thread": 0.75}},
		{"text only", "# Server\r\nredis_version:7.0.15\r\nos:Linux\r\n", map[string]float64{}},
		{"empty", "", map[string]float64{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ParseInfo(c.info); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParseInfo(%q) = %v, want %v", c.info, got, c.want)
			}
		})
	}
}

// TestInfoField: a field as written, or "" when absent; a field is not
// matched by another whose name it begins.
func TestInfoField(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nredis_version_sha:0\r\nconnected_clients:3\r\n"
	for _, c := range []struct{ field, want string }{
		{"redis_version", "7.0.15"},
		{"connected_clients", "3"},
		{"redis", ""},
		{"maxclients", ""},
	} {
		if got := InfoField(info, c.field); got != c.want {
			t.Errorf("InfoField(%q) = %q, want %q", c.field, got, c.want)
		}
	}
}

// TestReadThisProcess: the readers find this process and this machine,
// and find nothing for a process that is not there.
func TestReadThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc here")
	}
	if rss, peak := ProcMem("self"); rss <= 0 || peak < rss {
		t.Fatalf("ProcMem(self) = %d, %d", rss, peak)
	}
	if r, p := ProcMem("no-such-pid"); r != 0 || p != 0 {
		t.Fatalf("ProcMem of no process = %d, %d", r, p)
	}
	if _, ok := ProcTicks(os.Getpid()); !ok {
		t.Fatal("ProcTicks of this process: not read")
	}
	if _, ok := ProcTicks(-1); ok {
		t.Fatal("ProcTicks of no process: read")
	}
	if m, ok := MachineCPU(); !ok || m.Idle <= 0 {
		t.Fatalf("MachineCPU = %+v, %v", m, ok)
	}
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/schedstat"); err == nil {
		if _, ok := ProcRunQueueWait(os.Getpid()); !ok {
			t.Fatal("ProcRunQueueWait of this process: not read")
		}
	}
	if _, ok := ProcRunQueueWait(-1); ok {
		t.Fatal("ProcRunQueueWait of no process: read")
	}
}

// TestParseSchedstat: a thread's run and run-queue wait, in nanoseconds.
func TestParseSchedstat(t *testing.T) {
	cases := []struct {
		text      string
		run, wait time.Duration
		ok        bool
	}{
		{"1234567 89012 34\n", 1234567, 89012, true},
		{"0 0 0", 0, 0, true},
		{"12", 0, 0, false},
		{"x 1 2", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, c := range cases {
		r, w, ok := ParseSchedstat(c.text)
		if r != c.run || w != c.wait || ok != c.ok {
			t.Errorf("ParseSchedstat(%q) = %v, %v, %v; want %v, %v, %v", c.text, r, w, ok, c.run, c.wait, c.ok)
		}
	}
}

// TestParseCPUPressure: the "some" line's total, in microseconds.
func TestParseCPUPressure(t *testing.T) {
	cases := []struct {
		text string
		want time.Duration
		ok   bool
	}{
		{"some avg10=50.69 avg60=50.37 avg300=55.72 total=510354915\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 510354915 * time.Microsecond, true},
		{"full avg10=0.00 total=7\n", 0, false},
		{"some avg10=1.00 total=x\n", 0, false},
		{"", 0, false},
	}
	for _, c := range cases {
		got, ok := ParseCPUPressure(c.text)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseCPUPressure(%q) = %v, %v; want %v, %v", c.text, got, ok, c.want, c.ok)
		}
	}
}

// TestParseLoadAverage: the three load averages as written.
func TestParseLoadAverage(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"22.46 18.98 9.51 12/3456 7890\n", "22.46 18.98 9.51"},
		{"0.00 0.01 0.05", "0.00 0.01 0.05"},
		{"1.5 2.5", ""},
		{"", ""},
	} {
		if got := ParseLoadAverage(c.text); got != c.want {
			t.Errorf("ParseLoadAverage(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

// TestParseCPUModel: the first model name, trimmed; none on a cpuinfo
// that names the CPU otherwise.
func TestParseCPUModel(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"x86", "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\nprocessor\t: 1\nmodel name\t: other\n",
			"Intel(R) Xeon(R) CPU @ 2.20GHz"},
		{"arm64, no model name", "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n", ""},
		{"empty", "", ""},
	} {
		if got := ParseCPUModel(c.text); got != c.want {
			t.Errorf("%s: ParseCPUModel = %q, want %q", c.name, got, c.want)
		}
	}
}
