package main

import (
	"fmt"
	"io"

	"github.com/stockbench/stockbench/servers"
)

// newProvider picks the servers' provider and tells the user, in one line
// on stderr, about any choice made for them (such as the offline images
// standing in for the official ones).
func newProvider(o servers.Options, stderr io.Writer) (servers.Provider, error) {
	// Directories killed runs left behind go first, whatever the backend; a
	// failure to sweep does not stop this run.
	_, _ = servers.SweepLocal()
	p, err := servers.New(servers.OptionsFromEnv(o))
	if err != nil {
		return nil, err
	}
	if d, ok := p.(*servers.Docker); ok && d.Notice != "" {
		fmt.Fprintln(stderr, "stockbench:", d.Notice)
	}
	return p, nil
}
