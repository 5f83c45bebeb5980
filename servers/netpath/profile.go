// Package netpath puts a network between the harness and the servers it
// starts: a network namespace the run creates, a veth pair into it, and a
// round-trip time with jitter per store applied in the kernel's packet path
// (see Path). Profile is the setting (--rtt), parsed and printed here.
package netpath

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Link is the network between the service and one store: the round-trip
// time added to the path and its jitter (each packet's delay is drawn
// uniformly from RTT-Jitter … RTT+Jitter, never reordering a stream).
type Link struct {
	RTT    time.Duration
	Jitter time.Duration
}

// Profile is the network a run models between the service and MySQL and
// between the service and Redis. The zero Profile is plain loopback (no
// namespace, no added path); a set Profile with RTT 0 is the namespace's
// path with nothing added. Values are immutable; safe to share.
type Profile struct {
	// Name is the named profile it came from ("same-zone"), or "".
	Name         string
	MySQL, Redis Link
	// Set says the run goes through the namespace's path.
	Set bool
}

// Named is one named profile: what it models and where its figures come
// from.
type Named struct {
	Name    string
	Link    Link
	Models  string
	Sources string
}

// Profiles are the named profiles, both stores alike. Their figures are
// round trips measured between cloud VMs, as cited.
var Profiles = []Named{
	{Name: "same-host", Link: Link{},
		Models:  "service and stores on one machine (containers or pods on one node): the veth path only, nothing added",
		Sources: "the path itself; loopback is the run without --rtt"},
	{Name: "same-zone", Link: Link{RTT: 450 * time.Microsecond, Jitter: 80 * time.Microsecond},
		Models:  "service and stores in one availability zone of a cloud region (the article's 4-core cloud server setting)",
		Sources: "EC2 ping within one AZ: rtt avg 0.446 ms, mdev 0.078 ms (gist.github.com/josephmisiti/10312241); AWS CloudWatch Infrastructure Performance publishes intra-AZ medians"},
	{Name: "cross-zone", Link: Link{RTT: 1300 * time.Microsecond, Jitter: 100 * time.Microsecond},
		Models:  "service in one availability zone, stores in another of the same region",
		Sources: "EC2 ping between AZs: 1.33 ms avg (1b->1c), 2.1 ms (1b->1d) (gist.github.com/josephmisiti/10312241); AZs are <2 ms apart, usually <1 ms (J. Hamilton, AWS re:Invent 2014 SPOT301)"},
}

// ProfileNames lists the named profiles.
func ProfileNames() []string {
	out := make([]string, len(Profiles))
	for i, p := range Profiles {
		out[i] = p.Name
	}
	return out
}

// Lookup finds a named profile.
func Lookup(name string) (Named, bool) {
	for _, p := range Profiles {
		if p.Name == name {
			return p, true
		}
	}
	return Named{}, false
}

// Parse reads a profile: "" (loopback), a profile name (same-zone), one
// link for both stores ("0.5ms", "1ms±0.1ms", "1ms+-0.1ms"), or per store
// ("mysql=1ms,redis=0.2ms±0.05ms"; a store not named gets 0). A bare
// number is milliseconds. Negative values, a jitter larger than its RTT
// and unknown names or stores are errors.
func Parse(s string) (Profile, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Profile{}, nil
	}
	if n, ok := Lookup(s); ok {
		return Profile{Name: n.Name, MySQL: n.Link, Redis: n.Link, Set: true}, nil
	}
	p := Profile{Set: true}
	if !strings.Contains(s, "=") {
		l, err := parseLink(s)
		if err != nil {
			return Profile{}, err
		}
		p.MySQL, p.Redis = l, l
		return p, nil
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		store, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Profile{}, fmt.Errorf("rtt %q: want store=RTT for every store once one is named", part)
		}
		store = strings.TrimSpace(store)
		if seen[store] {
			return Profile{}, fmt.Errorf("rtt: store %s given twice", store)
		}
		seen[store] = true
		l, err := parseLink(v)
		if err != nil {
			return Profile{}, err
		}
		switch store {
		case "mysql":
			p.MySQL = l
		case "redis":
			p.Redis = l
		default:
			return Profile{}, fmt.Errorf("rtt: unknown store %q (want mysql or redis)", store)
		}
	}
	return p, nil
}

func parseLink(s string) (Link, error) {
	s = strings.TrimSpace(s)
	rtt, jit, hasJitter := strings.Cut(s, "±")
	if !hasJitter {
		rtt, jit, hasJitter = strings.Cut(s, "+-")
	}
	var l Link
	var err error
	if l.RTT, err = parseDuration(rtt); err != nil {
		if !hasJitter && !strings.ContainsAny(s, "0123456789") {
			return Link{}, fmt.Errorf("unknown network profile %q (want %s, or an RTT such as 0.5ms or 1ms±0.1ms)",
				s, strings.Join(ProfileNames(), ", "))
		}
		return Link{}, fmt.Errorf("rtt %q: %w", s, err)
	}
	if hasJitter {
		if l.Jitter, err = parseDuration(jit); err != nil {
			return Link{}, fmt.Errorf("rtt %q: jitter: %w", s, err)
		}
		if l.Jitter > l.RTT {
			return Link{}, fmt.Errorf("rtt %q: jitter %s is larger than the RTT %s", s, l.Jitter, l.RTT)
		}
	}
	return l, nil
}

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		ms, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return 0, fmt.Errorf("not a duration (want e.g. 0.5ms)")
		}
		d = time.Duration(ms * float64(time.Millisecond))
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration %s", s)
	}
	return d, nil
}

// String is the profile in the form Parse reads: its name when it has
// one, else one link or both; "" for loopback.
func (p Profile) String() string {
	switch {
	case !p.Set:
		return ""
	case p.Name != "":
		return p.Name
	case p.MySQL == p.Redis:
		return p.MySQL.String()
	}
	return "mysql=" + p.MySQL.String() + ",redis=" + p.Redis.String()
}

// String is "1ms" or "1ms±100µs".
func (l Link) String() string {
	s := l.RTT.String()
	if l.Jitter > 0 {
		s += "±" + l.Jitter.String()
	}
	return s
}

// Describe says what the profile models, for report headers: loopback,
// a named profile's description, or its figures.
func (p Profile) Describe() string {
	if !p.Set {
		return "loopback (127.0.0.1, nothing added)"
	}
	if n, ok := Lookup(p.Name); ok {
		return fmt.Sprintf("%s: RTT %s (%s)", n.Name, n.Link, n.Models)
	}
	if p.MySQL == p.Redis {
		return "RTT " + p.MySQL.String() + " to each store"
	}
	return "RTT mysql " + p.MySQL.String() + ", redis " + p.Redis.String()
}
