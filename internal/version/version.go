// Package version names the build of the binary, for results.json and
// `stockbench version`.
package version

import (
	"runtime/debug"
	"strings"
)

// Tool is the module version and VCS revision the binary was built from.
func Tool() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	// A pseudo-version already names the revision (and +dirty).
	if rev != "" && !strings.Contains(v, rev[:min(12, len(rev))]) {
		v += " " + rev
		if dirty {
			v += "+dirty"
		}
	}
	return v
}
