package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/rs/zerolog"

	"github.com/stockbench/stockbench/servers"
)

// Proxy is an in-process TCP proxy (toxiproxy used as a library) in front of
// the run's MySQL and Redis, listening on free 127.0.0.1 ports. The
// endpoints Listen returns lead through it; Apply and Remove put network
// faults on and take them off.
type Proxy struct {
	mu      sync.Mutex
	proxies map[Target]*toxiproxy.Proxy
	active  map[Target]Fault
}

// CheckEndpoints refuses what the proxy cannot stand in front of: a Redis
// Cluster (its nodes advertise their own addresses, and clients would go
// around the proxy to them), a Galera cluster (one proxied node is not the
// store stalling), and TLS (the certificate names the server, not the
// proxy).
func CheckEndpoints(ep servers.Endpoints) error {
	if len(ep.RedisCluster) > 0 {
		return errors.New("network faults on a Redis Cluster are not supported: its nodes advertise their own addresses, so clients would bypass the proxy")
	}
	if len(ep.MySQLCluster) > 1 {
		return errors.New("network faults on a Galera cluster are not supported: proxying one node is not the store stalling")
	}
	if ep.RedisURL != "" {
		if u, err := url.Parse(ep.RedisURL); err == nil && u.Scheme == "rediss" {
			return errors.New("network faults on a TLS Redis (rediss://) are not supported: the certificate names the server, not the proxy")
		}
	}
	cfg, err := mysql.ParseDSN(ep.MySQLDSN)
	if err != nil {
		return fmt.Errorf("mysql dsn %s: %v", ep.Redacted(), err)
	}
	if cfg.Net != "tcp" {
		return fmt.Errorf("network faults need MySQL over tcp, not %s", cfg.Net)
	}
	if cfg.TLSConfig != "" && cfg.TLSConfig != "false" {
		return errors.New("network faults on a TLS MySQL are not supported: the certificate names the server, not the proxy")
	}
	return nil
}

// CheckFor checks a plan against started endpoints: the backend (For) and,
// for the faults on a clustered store, CheckEndpoints' refusals. On a
// Redis Cluster only redis-lose is allowed, and only where the provider
// rolls every master back (clusterLosers).
func (p Plan) CheckFor(ep servers.Endpoints) error {
	if err := p.For(ep.Backend); err != nil {
		return err
	}
	for _, f := range p {
		switch {
		case f.Kind == Lose && len(ep.RedisCluster) > 0 && !clusterLosers[ep.Backend]:
			return fmt.Errorf("fault %s: on a Redis Cluster the %s backend cannot roll the masters back (the local and docker backends can)", f, ep.Backend)
		case f.Kind == Lose:
		case f.Target == Redis && len(ep.RedisCluster) > 0:
			return fmt.Errorf("fault %s: on a Redis Cluster only redis-lose is supported (its nodes advertise their own addresses; one node's fault is not the store's)", f)
		case f.Target == MySQL && len(ep.MySQLCluster) > 1:
			return fmt.Errorf("fault %s: faults on a Galera cluster are not supported (one node's fault is not the store's)", f)
		}
	}
	if p.NeedsProxy() {
		return CheckEndpoints(ep)
	}
	return nil
}

// clusterLosers are the backends whose provider rolls a Redis Cluster
// back as a whole (servers.DataLoser on every master).
var clusterLosers = map[string]bool{"local": true, "docker": true}

// Listen starts the proxy in front of ep's MySQL and Redis and returns
// endpoints that lead through it: the DSN's and the Redis address's (or
// URL's) host:port rewritten, everything else kept (PIDs, CPU, backend).
// Close stops it.
func Listen(ep servers.Endpoints) (servers.Endpoints, *Proxy, error) {
	if err := CheckEndpoints(ep); err != nil {
		return ep, nil, err
	}
	cfg, _ := mysql.ParseDSN(ep.MySQLDSN)
	redisAddr := ep.RedisAddr
	var redisURL *url.URL
	if ep.RedisURL != "" {
		u, err := url.Parse(ep.RedisURL)
		if err != nil {
			return ep, nil, errors.New("redis url: unparsable")
		}
		redisURL, redisAddr = u, u.Host
		if u.Port() == "" {
			redisAddr = net.JoinHostPort(u.Hostname(), "6379")
		}
	}
	log := zerolog.Nop()
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), log)
	p := &Proxy{proxies: map[Target]*toxiproxy.Proxy{}, active: map[Target]Fault{}}
	for target, upstream := range map[Target]string{MySQL: cfg.Addr, Redis: redisAddr} {
		tp := toxiproxy.NewProxy(server, string(target), "127.0.0.1:0", upstream)
		tp.Logger = &log
		if err := tp.Start(); err != nil {
			p.Close()
			return ep, nil, fmt.Errorf("proxy for %s: %w", target, err)
		}
		p.proxies[target] = tp
	}
	out := ep
	cfg.Addr = p.proxies[MySQL].Listen
	out.MySQLDSN = cfg.FormatDSN()
	if redisURL != nil {
		redisURL.Host = p.proxies[Redis].Listen
		out.RedisURL = redisURL.String()
	}
	out.RedisAddr = p.proxies[Redis].Listen
	return out, p, nil
}

// Addr is where the proxy listens for target.
func (p *Proxy) Addr(target Target) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if tp := p.proxies[target]; tp != nil {
		return tp.Listen
	}
	return ""
}

// Active is the network fault in force on target, if any.
func (p *Proxy) Active(target Target) (Fault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.active[target]
	return f, ok
}

type toxic struct {
	name, typ, stream string
	attrs             map[string]int64
}

// toxics are what a network fault puts on its target's proxy: latency on
// the replies (each round trip takes Latency ± Jitter more), a partition
// as a blackhole both ways (bytes dropped, connections left hanging), a
// reset's window as a reset_peer on every connection that sends.
func toxics(f Fault) []toxic {
	switch f.Kind {
	case Latency:
		return []toxic{{"latency", "latency", "downstream", map[string]int64{"latency": f.Latency.Milliseconds(), "jitter": f.Jitter.Milliseconds()}}}
	case Partition:
		return []toxic{{"blackhole_up", "timeout", "upstream", map[string]int64{"timeout": 0}},
			{"blackhole_down", "timeout", "downstream", map[string]int64{"timeout": 0}}}
	case Reset:
		if f.Duration > 0 {
			return []toxic{{"reset", "reset_peer", "upstream", map[string]int64{"timeout": 0}}}
		}
	}
	return nil
}

// Apply puts a network fault on its target. A reset first cuts every open
// connection (the proxy's listener is re-opened on the same port at once);
// with a duration, every connection that sends until Remove is reset too.
func (p *Proxy) Apply(f Fault) error {
	if !f.Network() {
		return fmt.Errorf("fault %s is not a network fault", f)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	tp := p.proxies[f.Target]
	if tp == nil {
		return fmt.Errorf("fault %s: no proxy for %s", f, f.Target)
	}
	if a, ok := p.active[f.Target]; ok {
		return fmt.Errorf("fault %s: %s is already under %s", f, f.Target, a)
	}
	if f.Kind == Reset {
		// Stop closes every connection of the proxy; Start listens again on
		// the address Start resolved the first time.
		tp.Stop()
		if err := tp.Start(); err != nil {
			return fmt.Errorf("fault %s: re-open the proxy on %s: %w", f, tp.Listen, err)
		}
	}
	var added []string
	for _, t := range toxics(f) {
		if _, err := tp.Toxics.AddToxicJson(strings.NewReader(toxicJSON(t))); err != nil {
			for _, n := range added {
				_ = tp.Toxics.RemoveToxic(context.Background(), n)
			}
			return fmt.Errorf("fault %s: add toxic %s: %w", f, t.typ, err)
		}
		added = append(added, t.name)
	}
	if f.Duration > 0 {
		p.active[f.Target] = f
	}
	return nil
}

func toxicJSON(t toxic) string {
	var attrs []string
	for k, v := range t.attrs {
		attrs = append(attrs, fmt.Sprintf("%q:%d", k, v))
	}
	return fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":{%s}}`, t.name, t.typ, t.stream, strings.Join(attrs, ","))
}

// Remove takes target's network fault off; it does nothing when none is
// on.
func (p *Proxy) Remove(target Target) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.active[target]
	if !ok {
		return nil
	}
	delete(p.active, target)
	tp := p.proxies[target]
	var errs []error
	for _, t := range toxics(f) {
		if err := tp.Toxics.RemoveToxic(context.Background(), t.name); err != nil {
			errs = append(errs, fmt.Errorf("fault %s: remove toxic %s: %w", f, t.typ, err))
		}
	}
	return errors.Join(errs...)
}

// Close removes every fault and stops the proxy, closing its connections.
// It is safe to call more than once.
func (p *Proxy) Close() error {
	var errs []error
	for _, t := range []Target{MySQL, Redis} {
		errs = append(errs, p.Remove(t))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, tp := range p.proxies {
		tp.Stop()
	}
	return errors.Join(errs...)
}
