package netpath

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	ms := time.Millisecond
	us := time.Microsecond
	cases := []struct {
		in           string
		mysql, redis Link
		set          bool
		name, str    string
	}{
		{in: "", set: false},
		{in: "0", set: true, str: "0s"},
		{in: "0.5ms", mysql: Link{RTT: 500 * us}, redis: Link{RTT: 500 * us}, set: true, str: "500µs"},
		{in: "2", mysql: Link{RTT: 2 * ms}, redis: Link{RTT: 2 * ms}, set: true, str: "2ms"},
		{in: "1ms±0.1ms", mysql: Link{ms, 100 * us}, redis: Link{ms, 100 * us}, set: true, str: "1ms±100µs"},
		{in: "1ms+-0.1ms", mysql: Link{ms, 100 * us}, redis: Link{ms, 100 * us}, set: true, str: "1ms±100µs"},
		{in: "1ms±1ms", mysql: Link{ms, ms}, redis: Link{ms, ms}, set: true, str: "1ms±1ms"},
		{in: "mysql=1ms,redis=0.2ms", mysql: Link{RTT: ms}, redis: Link{RTT: 200 * us}, set: true, str: "mysql=1ms,redis=200µs"},
		{in: " redis = 0.2ms±50us ", redis: Link{200 * us, 50 * us}, set: true, str: "mysql=0s,redis=200µs±50µs"},
		{in: "same-zone", mysql: Link{450 * us, 80 * us}, redis: Link{450 * us, 80 * us}, set: true, name: "same-zone", str: "same-zone"},
		{in: "cross-zone", mysql: Link{1300 * us, 100 * us}, redis: Link{1300 * us, 100 * us}, set: true, name: "cross-zone", str: "cross-zone"},
		{in: "same-host", set: true, name: "same-host", str: "same-host"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			p, err := Parse(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if p.MySQL != c.mysql || p.Redis != c.redis || p.Set != c.set || p.Name != c.name {
				t.Fatalf("Parse(%q) = %+v", c.in, p)
			}
			if got := p.String(); got != c.str {
				t.Fatalf("String() = %q, want %q", got, c.str)
			}
			// What String prints parses back to the same profile.
			if back, err := Parse(p.String()); err != nil || back != p {
				t.Fatalf("Parse(String()) = %+v, %v; want %+v", back, err, p)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	cases := []struct{ in, want string }{
		{"-1ms", "negative"},
		{"1ms±-0.1ms", "negative"},
		{"mysql=-0.5ms", "negative"},
		{"1ms±2ms", "larger than the RTT"},
		{"0±0.1ms", "larger than the RTT"},
		{"lan", "unknown network profile"},
		{"same-zoen", "unknown network profile"},
		{"pg=1ms", "unknown store"},
		{"mysql=1ms,mysql=2ms", "given twice"},
		{"mysql=1ms,2ms", "store=RTT"},
		{"1parsec", "not a duration"},
		{"1ms±", "empty"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			_, err := Parse(c.in)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse(%q) = %v, want an error saying %q", c.in, err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

func TestProfilesCiteSources(t *testing.T) {
	for _, p := range Profiles {
		if p.Models == "" || p.Sources == "" {
			t.Errorf("profile %s: says neither what it models nor where its figures come from", p.Name)
		}
		if p.Link.Jitter > p.Link.RTT {
			t.Errorf("profile %s: jitter above its RTT", p.Name)
		}
	}
}
