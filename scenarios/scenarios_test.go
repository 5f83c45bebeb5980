package scenarios

import (
	"reflect"
	"testing"
	"time"
)

func TestParseRange(t *testing.T) {
	cases := []struct {
		in      string
		want    Range
		wantErr bool
	}{
		{"200ms-500ms", Range{200 * time.Millisecond, 500 * time.Millisecond}, false},
		{"300ms", Range{300 * time.Millisecond, 300 * time.Millisecond}, false},
		{"0", Range{}, false},
		{"500ms-200ms", Range{}, true}, // reversed
		{"abc", Range{}, true},
		{"-5ms", Range{}, true}, // empty lower bound
	}
	for _, c := range cases {
		got, err := ParseRange(c.in)
		if (err != nil) != c.wantErr || !c.wantErr && got != c.want {
			t.Errorf("ParseRange(%q) = %v, %v; want %v, err %v", c.in, got, err, c.want, c.wantErr)
		}
	}
}

func TestFlashSeeded(t *testing.T) {
	p := FlashParams{Stock: 100, Buyers: 120, PayDelay: Range{200 * time.Millisecond, 500 * time.Millisecond}, Abandon: 0.25, TTL: time.Second, Seed: 7}
	a, b := Flash(p), Flash(p)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different journeys")
	}
	p.Seed = 8
	if reflect.DeepEqual(a, Flash(p)) {
		t.Fatal("different seeds gave the same journeys")
	}
	abandon := 0
	for _, j := range a {
		if j.Kind == "abandon" {
			abandon++
			continue
		}
		d := j.Phases[1].Think
		if d < 200*time.Millisecond || d > 500*time.Millisecond {
			t.Fatalf("pay delay %v outside range", d)
		}
	}
	if abandon < 15 || abandon > 45 {
		t.Fatalf("%d of 120 abandon at 25%%", abandon)
	}
}

func TestRaceMix(t *testing.T) {
	js := Race(RaceParams{Stock: 100, Buyers: 2000, PayDelay: Range{0, 10 * time.Millisecond}, TTL: time.Minute, ShortTTL: 100 * time.Millisecond, Seed: 1})
	seen := map[string]int{}
	for _, j := range js {
		seen[j.Kind]++
	}
	for _, k := range RaceKinds {
		want := k.Share * 2000
		if got := float64(seen[k.Kind]); got < want*0.7 || got > want*1.3 {
			t.Errorf("%s: %v journeys, want about %v", k.Kind, got, want)
		}
	}
}
