// Command stockbench compares inventory-reservation strategies on real MySQL
// and Redis: throughput, tail latency, and whether stock was oversold or lost.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

func main() {
	// STOCKBENCH_CPUPROFILE=FILE profiles the harness itself, to see what
	// the load generator spends its CPU on.
	if path := os.Getenv("STOCKBENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "stockbench:", err)
			os.Exit(exitUsage)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "stockbench:", err)
			os.Exit(exitUsage)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	// A closed output pipe (stockbench run … | head -n 3) must not kill a
	// run before it stops its servers and removes its directories: writes
	// to it fail instead, and the run goes on to its end.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if code != exitOK {
		pprof.StopCPUProfile()
		os.Exit(code)
	}
}
