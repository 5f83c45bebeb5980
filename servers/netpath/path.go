package netpath

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Stores a Path shapes, by queue number.
const (
	StoreMySQL = "mysql"
	StoreRedis = "redis"
)

// namePrefix starts the name of every namespace a run creates; the rest
// is the creating process's pid and a random tag, so runs never collide
// and Sweep knows a dead run's namespace.
const namePrefix = "stockbench-"

// Path is a network namespace the run creates with a veth pair into it:
// servers started through Command listen on the namespace's address (Addr)
// and the harness, outside, reaches them across the veth. Shape delays the
// packets a server sends back (the whole RTT on the server-to-service
// direction, the service-to-server direction untouched) in the kernel's
// path: an iptables rule in the namespace hands them to a netfilter queue,
// which keeps each packet in the kernel while this process decides when it
// leaves (metadata only crosses to userspace; no copy of the stream, the
// TCP connection stays end to end). The kernel here has no netem
// (CONFIG_NET_SCH_NETEM is off), which would do the same without the
// userspace timer.
//
// A Path's methods are safe for concurrent use; Close is idempotent and
// removes everything Create made.
type Path struct {
	ns, hostIf, nsIf string
	hostIP, nsIP     net.IP

	mu      sync.Mutex
	shapers map[string]*shaper
	fds     []int
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closed  bool
	errs    []error
}

// Method describes how a Path named ns delays packets, for results.
func Method(ns string) string {
	return "veth into network namespace " + ns + "; the RTT is added to each store's replies (server to service) by holding them in a netfilter queue released by a real-time thread (the kernel keeps the packets; no netem in this kernel)"
}

// ContainerMethod describes how a Path attached to containers' namespace
// ns (Attach) delays packets, for results.
func ContainerMethod(ns string) string {
	return "containers in a network namespace of their own (docker network none, named " + ns + "), reached over a veth pair the run adds; the RTT is added to each store's replies (server to service) by holding them in a netfilter queue released by a real-time thread (the kernel keeps the packets; no docker-proxy, no netem in this kernel)"
}

// Available says whether this machine can build a Path: root, ip and
// iptables on PATH, network namespaces. The error says what is missing.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces and iptables)")
	}
	for _, bin := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found (Debian: apt-get install iproute2 iptables)", bin)
		}
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return errors.New("no network namespaces in this kernel")
	}
	return nil
}

// Create makes the namespace, the veth pair and its addresses: a /30 in
// 10.231.0.0/16 not used on this host, the host side .1 and the namespace
// side .2. Namespaces left by runs that died are removed first.
func Create(ctx context.Context) (*Path, error) {
	return create(ctx, 0)
}

// Attach makes a Path into the network namespace that process pid runs in
// (a container's, whose pid the engine reports) instead of a new one: the
// namespace gets a name (ip netns attach), the veth pair and the
// addresses as in Create. Servers that share that namespace (containers
// joined to it) listen on Addr. Close removes the name and the veth pair;
// the namespace itself ends with its last process (the container).
func Attach(ctx context.Context, pid int) (*Path, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("network path: attach to pid %d: no such process", pid)
	}
	return create(ctx, pid)
}

func create(ctx context.Context, pid int) (*Path, error) {
	if err := Available(); err != nil {
		return nil, fmt.Errorf("network path: %w", err)
	}
	_, _ = Sweep(ctx)
	tag := fmt.Sprintf("%x", rand.Uint32()&0xffffff)
	p := &Path{
		ns:      fmt.Sprintf("%s%d-%s", namePrefix, os.Getpid(), tag),
		hostIf:  "sbh" + tag, // IFNAMSIZ: at most 15 bytes
		nsIf:    "sbn" + tag,
		shapers: map[string]*shaper{},
	}
	var err error
	if p.hostIP, p.nsIP, err = freeSubnet(); err != nil {
		return nil, fmt.Errorf("network path: %w", err)
	}
	first := []string{"ip", "netns", "add", p.ns}
	if pid > 0 {
		first = []string{"ip", "netns", "attach", p.ns, strconv.Itoa(pid)}
	}
	steps := [][]string{
		first,
		{"ip", "link", "add", p.hostIf, "type", "veth", "peer", "name", p.nsIf, "netns", p.ns},
		{"ip", "addr", "add", p.hostIP.String() + "/30", "dev", p.hostIf},
		{"ip", "link", "set", p.hostIf, "up"},
		{"ip", "-n", p.ns, "addr", "add", p.nsIP.String() + "/30", "dev", p.nsIf},
		{"ip", "-n", p.ns, "link", "set", p.nsIf, "up"},
		{"ip", "-n", p.ns, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := run(ctx, s...); err != nil {
			p.Close()
			return nil, fmt.Errorf("network path: %w", err)
		}
	}
	p.cancel = func() {}
	return p, nil
}

// Name is the namespace's name.
func (p *Path) Name() string { return p.ns }

// Addr is the namespace's address: servers listen on it, the harness
// dials it.
func (p *Path) Addr() string { return p.nsIP.String() }

// Command returns the command line that runs bin inside the namespace
// (ip netns exec execs bin: the pid is the server's).
func (p *Path) Command(bin string, args ...string) (string, []string) {
	return "ip", append([]string{"netns", "exec", p.ns, bin}, args...)
}

// Shape registers the server listening on port as store's: its packets
// out of the namespace are delayed by the profile's link for that store,
// from the next Set on (a link of 0 adds no rule: the packets take the
// veth path untouched).
func (p *Path) Shape(store string, port int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("network path: closed")
	}
	if _, ok := p.shapers[store]; ok {
		return fmt.Errorf("network path: %s shaped twice", store)
	}
	queue := uint16(len(p.shapers))
	fd, err := socketIn(p.ns)
	if err != nil {
		return fmt.Errorf("network path: %w", err)
	}
	p.fds = append(p.fds, fd)
	s, err := newShaper(fd, queue, uint64(port))
	if err != nil {
		return fmt.Errorf("network path: %w", err)
	}
	s.port = port
	ctx, cancel := context.WithCancel(context.Background())
	prev := p.cancel
	p.cancel = func() { prev(); cancel() }
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := s.run(ctx); err != nil {
			p.mu.Lock()
			p.errs = append(p.errs, err)
			p.mu.Unlock()
		}
	}()
	p.shapers[store] = s
	return nil
}

// Set gives the shaped stores the profile's links: a sweep over RTT
// reuses one path and its servers. Packets already held keep their delay.
func (p *Path) Set(ctx context.Context, pr Profile) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("network path: closed")
	}
	for store, s := range p.shapers {
		l := pr.MySQL
		if store == StoreRedis {
			l = pr.Redis
		}
		s.SetDelay(l.RTT, l.Jitter)
		want := l.RTT > 0 || l.Jitter > 0
		if want == s.ruled {
			continue
		}
		op := "-A"
		if !want {
			op = "-D"
		}
		if err := run(ctx, "ip", "netns", "exec", p.ns, "iptables", "-w", op, "OUTPUT", "-p", "tcp",
			"-s", p.nsIP.String(), "--sport", strconv.Itoa(s.port), "-j", "NFQUEUE", "--queue-num", strconv.Itoa(int(s.queue))); err != nil {
			return fmt.Errorf("network path: %w", err)
		}
		s.ruled = want
	}
	return nil
}

// Stats are the shaper's counts for one store: packets held, the deepest
// queue, netlink messages lost (their packets left early), and whether
// its thread runs at real-time priority.
type Stats struct {
	Held, MaxDepth, Lost int64
	RealTime             bool
	// MeanLate and MaxLate are how long after its due time a packet left,
	// on average and at most: the shaper's own error.
	MeanLate, MaxLate time.Duration
}

// Stats returns each shaped store's counts.
func (p *Path) Stats() map[string]Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]Stats{}
	for store, s := range p.shapers {
		st := Stats{Held: s.held.Load(), MaxDepth: s.maxDepth.Load(), Lost: s.lost.Load(), RealTime: s.realtime.Load(),
			MaxLate: time.Duration(s.lateMax.Load())}
		if st.Held > 0 {
			st.MeanLate = time.Duration(s.lateNS.Load() / st.Held)
		}
		out[store] = st
	}
	return out
}

// Close stops shaping (held packets are released), deletes the namespace
// (its half of the veth pair takes the host half with it) and returns the
// first error a shaper met. Servers inside should be stopped first; a
// namespace with processes still in it vanishes when they exit. For an
// attached namespace (Attach) it removes the name and the veth pair; the
// rules inside end with the namespace.
func (p *Path) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	cancel, fds := p.cancel, p.fds
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	p.wg.Wait()
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
	var errs []error
	if err := run(context.Background(), "ip", "netns", "del", p.ns); err != nil && !strings.Contains(err.Error(), "No such file") {
		errs = append(errs, err)
	}
	// Deleting the namespace removes the pair; a pair never moved into it
	// (a failed Create) is removed here.
	_ = exec.Command("ip", "link", "del", p.hostIf).Run()
	p.mu.Lock()
	errs = append(errs, p.errs...)
	p.mu.Unlock()
	return errors.Join(errs...)
}

// Sweep deletes the namespaces of runs whose process is gone and returns
// their names. It never touches a live run's namespace or one it did not
// name.
func Sweep(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir("/var/run/netns")
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), namePrefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		if err := run(ctx, "ip", "netns", "del", e.Name()); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, e.Name())
	}
	return out, errors.Join(errs...)
}

// freeSubnet picks a /30 in 10.231.0.0/16 that no address on this host
// falls in.
func freeSubnet() (host, ns net.IP, err error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, nil, err
	}
	used := map[[2]byte]bool{}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip4 := ipn.IP.To4(); ip4 != nil && ip4[0] == 10 && ip4[1] == 231 {
				used[[2]byte{ip4[2], ip4[3] &^ 3}] = true
			}
		}
	}
	for range 64 {
		b := [2]byte{byte(rand.IntN(256)), byte(rand.IntN(64) * 4)}
		if b == [2]byte{0, 0} || used[b] {
			continue
		}
		return net.IPv4(10, 231, b[0], b[1]+1).To4(), net.IPv4(10, 231, b[0], b[1]+2).To4(), nil
	}
	return nil, nil, errors.New("no free /30 in 10.231.0.0/16")
}

// socketIn opens a netfilter netlink socket inside namespace ns, on a
// thread of its own: the thread enters the namespace, opens the socket
// (which stays in that namespace) and goes back; a thread that cannot go
// back is never reused (its goroutine ends locked).
func socketIn(ns string) (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, err}
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open(filepath.Join("/var/run/netns", ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, err}
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("enter namespace: %w", err)}
			return
		}
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err == nil {
			if berr := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); berr != nil {
				unix.Close(fd)
				fd, err = -1, berr
			}
		}
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{fd, err}
	}()
	r := <-ch
	if r.err != nil {
		return -1, fmt.Errorf("netfilter queue socket: %w", r.err)
	}
	return r.fd, nil
}

func run(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
