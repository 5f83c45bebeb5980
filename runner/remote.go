package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/stockbench/stockbench/faults"
	"github.com/stockbench/stockbench/servers"
	svcapi "github.com/stockbench/stockbench/service"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

// ServiceOptions run the service tier as processes of its own (--service
// process:N) instead of inside the generator: each run starts Procs
// instances of its strategy through Start, on the run's stores, and the
// buyers call them over the order API (service.Client, balanced round
// robin). The ack log and the ledger stay in the generator, so an
// instance's crash never erases what a client was told. The zero value is
// the default: the strategy runs in process.
type ServiceOptions struct {
	Procs int
	Start StartServices
}

// Remote reports whether the strategies run as service processes.
func (o ServiceOptions) Remote() bool { return o.Procs > 0 }

// ServiceSpec is what StartServices starts: N instances of Strategy on the
// stores at Endpoints, built with Config's knobs (DB and Redis unset),
// each with its own pool of Pool connections per store and its own state
// directory StateDirs[i], which a restart of instance i reuses.
type ServiceSpec struct {
	Endpoints servers.Endpoints
	Strategy  string
	Config    strategies.Config
	Pool      int
	StateDirs []string
}

// ServiceGroup is a started set of service instances. Its faults.Services
// methods carry out svc-kill (a restarted instance keeps its address, state
// directory and clock offset), svc-pause and svc-clock.
type ServiceGroup interface {
	faults.Services
	// URLs are the instances' base URLs, in instance order.
	URLs() []string
	// PIDs are the instances' process ids now (a restarted instance's
	// new one), for the CPU sampler; nil when they are not processes of
	// this machine.
	PIDs() []int
	// Stop drains every instance (SIGTERM) and waits for it; safe to call
	// more than once.
	Stop() error
}

// StartServices starts the instances of spec and returns once each
// announced its address (not necessarily healthy yet: the client's Setup
// waits for that). When ctx ends the instances are stopped.
type StartServices func(ctx context.Context, spec ServiceSpec) (ServiceGroup, error)

// problems are what o's other settings do not allow with service
// processes (yet), each naming its flag.
func (so ServiceOptions) problems(o Options) []error {
	var errs []error
	switch {
	case so.Procs < 0:
		errs = append(errs, fmt.Errorf("--service process:%d: want at least one instance", so.Procs))
	case !so.Remote():
		for _, f := range o.Faults {
			if f.Service() {
				errs = append(errs, fmt.Errorf("--fault %s: needs --service process[:N] (service processes to act on)", f))
			}
		}
		return errs
	}
	if o.Procs > 1 || o.Segment.Of > 1 {
		errs = append(errs, errors.New("--service process: not with several generators (--procs, --shard) yet"))
	}
	for _, f := range o.Faults {
		switch {
		case f.Network() || f.Kind == faults.AppCrash:
			errs = append(errs, fmt.Errorf("--fault %s: not with --service process yet (network faults and app-crash act on the generator's own pools and strategy instance; svc-kill, svc-pause, svc-clock and the servers' process faults work)", f))
		case f.Instance >= so.Procs:
			errs = append(errs, fmt.Errorf("--fault %s: no instance %d of --service process:%d", f, f.Instance, so.Procs))
		}
	}
	return errs
}

// startRemote starts the run's service instances and returns the client
// the buyers call in place of the strategy, and the instances; they are
// stopped when the run ends (later). sep are the strategy's endpoints:
// its sessions' isolation (--isolation) is in their DSN.
func startRemote(ctx context.Context, o Options, sep servers.Endpoints, e registry.Entry, cfg strategies.Config,
	later func(func())) (strategies.Strategy, ServiceGroup, error) {
	if o.Service.Start == nil {
		return nil, nil, fmt.Errorf("--service process: no way to start service instances")
	}
	spec := ServiceSpec{Endpoints: sep, Strategy: e.Name, Config: cfg, Pool: o.pool()}
	spec.Config.DB, spec.Config.Redis = nil, nil
	for i := 0; i < o.Service.Procs; i++ {
		spec.StateDirs = append(spec.StateDirs, filepath.Join(cfg.LocalDir, fmt.Sprintf("svc-%d", i)))
	}
	grp, err := o.Service.Start(ctx, spec)
	if err != nil {
		return nil, nil, fmt.Errorf("service instances: %w", err)
	}
	later(func() { _ = grp.Stop() })
	c, err := svcapi.NewClient(svcapi.ClientOptions{Name: e.Name, Conns: o.pool()}, grp.URLs()...)
	if err != nil {
		return nil, grp, err
	}
	return c, grp, nil
}
