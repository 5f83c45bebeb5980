package servers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/stockbench/stockbench/docker"
	"github.com/stockbench/stockbench/servers/netpath"
)

// Label marks every container stockbench starts, so `stockbench down` can
// find leftovers.
const Label = "stockbench"

// LabelPID holds the process id of the stockbench that started a container.
const LabelPID = "stockbench.pid"

// OfflineRecipe is the recipe version docker/build-offline-images.sh writes
// into the offline images' stockbench.offline label (its RECIPE); images of
// another recipe are refused with a line saying to rebuild them.
const OfflineRecipe = "2"

// Default images: the official ones, and the offline ones that
// docker/build-offline-images.sh builds from Debian packages.
const (
	DefaultMySQLImage   = "mysql:8.0"
	DefaultRedisImage   = "redis:7"
	OfflineMySQLImage   = "stockbench/mariadb-offline:latest"
	OfflineRedisImage   = "stockbench/redis-offline:latest"
	dockerStartDeadline = 3 * time.Minute
)

// Network modes of the docker provider.
const (
	// NetworkHost runs the containers in the host's network namespace with
	// each server bound to 127.0.0.1 on a free port: traffic stays on
	// loopback and no docker-proxy sits in the path (measured here: the
	// proxy halved Redis throughput and multiplied its P99 by 6-8).
	NetworkHost = "host"
	// NetworkPublished publishes each server's port on 127.0.0.1 through the
	// engine, where host networking is not available (Docker Desktop).
	NetworkPublished = "published"
	// NetworkNetns is the network of containers started behind a network
	// profile: their own namespace, reached over the run's veth pair
	// (Docker.Profile). It is what Endpoints.Network says, never a mode
	// NewDocker picks.
	NetworkNetns = "netns"
)

// Docker runs MySQL and Redis as containers through the Docker engine
// (DOCKER_HOST or the default socket). Servers answer on 127.0.0.1 only:
// with host networking on a Linux engine, else through ports published on
// 127.0.0.1. The root password is random per run; the containers carry the
// stockbench label and are removed by Stop, which the CLI calls on normal
// exit, on error and on Ctrl-C.
type Docker struct {
	MySQLImage, RedisImage string
	// Network is NetworkHost or NetworkPublished; NewDocker picks host
	// networking on a Linux engine that is not Docker Desktop.
	Network string
	// Notice, when set, is one line for the user about a choice made for
	// them (the offline images standing in for the official ones).
	Notice string
	// RedisPersistence is the Redis AOF setting (see Local).
	RedisPersistence string
	// RedisCluster, when > 0, runs a Redis Cluster of that many masters
	// (no replicas), one container each, instead of one Redis
	// (dockercluster.go; host networking only).
	RedisCluster int
	// Profile, when set, puts both servers behind a network profile: a
	// holder container with no network owns a namespace, the servers'
	// containers join it (as a pod's containers join its sandbox), and the
	// run attaches a veth pair and the profile's shaper to it
	// (netpath.Attach). Needs host networking's engine (Linux, this
	// machine's kernel) and root. The zero Profile keeps host networking.
	Profile netpath.Profile

	pool      *dockertest.Pool
	mu        sync.Mutex
	resources []*dockertest.Resource
	confDir   string
	watches   []*cpuWatch
	// roles are the containers by target, ep the endpoints, for process
	// faults (dockerfaulter.go).
	roles map[string]*dockerRole
	ep    Endpoints
	// holder is the container owning the servers' namespace and path its
	// shaped network, with a Profile.
	holder *dockertest.Resource
	path   *netpath.Path
	// checkpoint is the Redis data Checkpoint saved (dockerlose.go).
	checkpoint *redisCheckpoint
	// redisNodes are a Redis Cluster's node containers and nodeCheckpoints
	// what Checkpoint saved of each (the cluster loses data as a whole).
	redisNodes      []*dockerRole
	nodeCheckpoints []*redisCheckpoint
}

// dockerPool connects to the engine and checks that it answers.
func dockerPool() (*dockertest.Pool, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if err := pool.Client.Ping(); err != nil {
		return nil, fmt.Errorf("docker engine does not answer: %w", err)
	}
	return pool, nil
}

// NewDocker connects to the engine. Empty image names take the defaults.
func NewDocker(mysqlImage, redisImage string) (*Docker, error) {
	pool, err := dockerPool()
	if err != nil {
		return nil, err
	}
	pool.MaxWait = dockerStartDeadline
	if mysqlImage == "" {
		mysqlImage = DefaultMySQLImage
	}
	if redisImage == "" {
		redisImage = DefaultRedisImage
	}
	return &Docker{MySQLImage: mysqlImage, RedisImage: redisImage, Network: networkMode(pool), pool: pool}, nil
}

// networkMode picks host networking on a Linux engine, published ports on
// Docker Desktop (its "host" is a VM, not this machine). STOCKBENCH_DOCKER_NETWORK
// (host or published) overrides the choice.
func networkMode(pool *dockertest.Pool) string {
	switch os.Getenv("STOCKBENCH_DOCKER_NETWORK") {
	case NetworkHost:
		return NetworkHost
	case NetworkPublished:
		return NetworkPublished
	}
	if runtime.GOOS != "linux" {
		return NetworkPublished
	}
	// The engine must share this machine's network namespace: a remote
	// DOCKER_HOST, Docker Desktop (a VM) or a rootless engine (its own
	// namespace) would put "host" somewhere 127.0.0.1 here cannot reach.
	if h := os.Getenv("DOCKER_HOST"); h != "" && !strings.HasPrefix(h, "unix://") {
		return NetworkPublished
	}
	info, err := pool.Client.Info()
	if err != nil || info.OSType != "linux" || strings.Contains(info.OperatingSystem, "Docker Desktop") {
		return NetworkPublished
	}
	for _, o := range info.SecurityOptions {
		if strings.Contains(o, "rootless") {
			return NetworkPublished
		}
	}
	return NetworkHost
}

// newDockerBackend is --backend docker: the requested images, or with the
// default images asked for but missing and unpullable, the offline ones,
// saying so in Notice.
func newDockerBackend(mysqlImage, redisImage string) (*Docker, error) {
	d, err := NewDocker(mysqlImage, redisImage)
	if err != nil {
		return nil, err
	}
	defaults := d.MySQLImage == DefaultMySQLImage && d.RedisImage == DefaultRedisImage
	if !defaults || (imageUsable(d.pool, d.MySQLImage) && imageUsable(d.pool, d.RedisImage)) {
		return d, nil
	}
	if imageUsable(d.pool, OfflineMySQLImage) && imageUsable(d.pool, OfflineRedisImage) {
		d.Notice = fmt.Sprintf("docker: %s and %s cannot be pulled; using the offline images %s and %s",
			d.MySQLImage, d.RedisImage, OfflineMySQLImage, OfflineRedisImage)
		d.MySQLImage, d.RedisImage = OfflineMySQLImage, OfflineRedisImage
		return d, nil
	}
	return nil, fmt.Errorf("docker images %s and %s can be neither found nor pulled, and the offline ones are missing or of an older recipe (make images-offline builds them)", d.MySQLImage, d.RedisImage)
}

// imageUsable reports whether the image is present or can be pulled. An
// offline image (labelled stockbench.offline) must be of the current
// recipe: older ones lack fixes the provider relies on.
func imageUsable(pool *dockertest.Pool, image string) bool {
	if img, err := pool.Client.InspectImage(image); err == nil {
		if img.Config != nil {
			if v, ok := img.Config.Labels["stockbench.offline"]; ok {
				return v == OfflineRecipe
			}
		}
		return true
	}
	repo, tag := splitImage(image)
	return pool.Client.PullImage(dc.PullImageOptions{Repository: repo, Tag: tag}, dc.AuthConfiguration{}) == nil
}

func splitImage(image string) (repo, tag string) {
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return image, "latest"
	}
	return image[:i], image[i+1:]
}

// autoDocker returns a docker provider when an engine answers and either
// the requested images or the offline ones are usable; otherwise nil and
// the reason.
func autoDocker(mysqlImage, redisImage string) (*Docker, string) {
	d, err := NewDocker(mysqlImage, redisImage)
	if err != nil {
		return nil, err.Error()
	}
	if imageUsable(d.pool, d.MySQLImage) && imageUsable(d.pool, d.RedisImage) {
		return d, ""
	}
	if imageUsable(d.pool, OfflineMySQLImage) && imageUsable(d.pool, OfflineRedisImage) {
		// Said as with --backend docker: the figures are the offline
		// images' servers (MariaDB, Debian's Redis), not the official ones.
		d.Notice = fmt.Sprintf("docker: %s and %s cannot be pulled; using the offline images %s and %s",
			d.MySQLImage, d.RedisImage, OfflineMySQLImage, OfflineRedisImage)
		d.MySQLImage, d.RedisImage = OfflineMySQLImage, OfflineRedisImage
		return d, ""
	}
	return nil, fmt.Sprintf("docker images %s and %s can be neither found nor pulled, and the offline ones are missing or of an older recipe (make images-offline builds them)", d.MySQLImage, d.RedisImage)
}

func randomSecret() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// Start runs both containers and waits until a real ping answers.
//
// With host networking a free port may be taken by another process between
// choosing it and the server binding it; a container that exits during
// start is then tried again with new ports, up to three times.
func (d *Docker) Start(ctx context.Context) (ep Endpoints, err error) {
	for attempt := 1; ; attempt++ {
		ep, err = d.startOnce(ctx)
		if err == nil || !errors.Is(err, errContainerExited) || d.Network != NetworkHost || attempt == 3 || ctx.Err() != nil {
			return ep, err
		}
	}
}

var errContainerExited = errors.New("exited")

func (d *Docker) startOnce(ctx context.Context) (ep Endpoints, err error) {
	defer func() {
		if err != nil {
			d.Stop()
		}
	}()
	ep.Backend = "docker"
	if ep.RedisPersistence, err = checkPersistence(d.RedisPersistence); err != nil {
		return ep, err
	}
	pw, err := randomSecret()
	if err != nil {
		return ep, err
	}
	redisPW, err := randomSecret()
	if err != nil {
		return ep, err
	}
	if d.confDir, err = MkdirTemp("stockbench-docker-"); err != nil {
		return ep, fmt.Errorf("docker: %w", err)
	}
	mycnf := filepath.Join(d.confDir, "stockbench.cnf")
	rconf := filepath.Join(d.confDir, "redis.conf")
	if err := os.WriteFile(mycnf, docker.MySQLConf, 0o644); err != nil {
		return ep, fmt.Errorf("docker: %w", err)
	}
	if err := os.WriteFile(rconf, docker.RedisConf, 0o644); err != nil {
		return ep, fmt.Errorf("docker: %w", err)
	}

	// With host networking each server binds 127.0.0.1 on a free port of
	// this machine; mysqlx (MySQL 8.0's second listener) is turned off so
	// two runs cannot collide on its fixed port. "loose-" lets MariaDB
	// ignore an option it does not have.
	var myCmd, rdCmd []string
	myPort, rdPort := 3306, 6379
	host := "127.0.0.1"
	if d.Profile.Set {
		// The namespace is the run's own: the default ports cannot collide.
		if host, err = d.startHolder(ctx); err != nil {
			return ep, err
		}
		myCmd = []string{"mysqld", "--port=" + strconv.Itoa(myPort), "--bind-address=" + host, "--loose-mysqlx=OFF"}
		rdCmd = []string{"--port", strconv.Itoa(rdPort), "--bind", host}
	} else if d.Network == NetworkHost {
		if myPort, err = freePort(); err != nil {
			return ep, err
		}
		if rdPort, err = freePort(); err != nil {
			return ep, err
		}
		myCmd = []string{"mysqld", "--port=" + strconv.Itoa(myPort), "--bind-address=127.0.0.1", "--loose-mysqlx=OFF"}
		rdCmd = []string{"--port", strconv.Itoa(rdPort), "--bind", "127.0.0.1"}
	}
	my, err := d.run(d.MySQLImage, "3306/tcp", []string{"MYSQL_ROOT_PASSWORD=" + pw, "MYSQL_DATABASE=stockbench"}, myCmd,
		[]string{mycnf + ":/etc/mysql/conf.d/stockbench.cnf:ro"})
	if err != nil {
		return ep, err
	}
	var rd *dockertest.Resource
	var rdMore []*dockertest.Resource // a cluster's further nodes
	if d.RedisCluster > 0 {
		var nodes []*dockertest.Resource
		if ep.RedisCluster, nodes, err = d.startRedisCluster(ctx, d.RedisCluster, rconf, redisPW, ep.RedisPersistence); err != nil {
			return ep, err
		}
		rd, rdMore = nodes[0], nodes[1:]
	} else if rd, err = d.run(d.RedisImage, "6379/tcp", nil,
		append(append([]string{"redis-server", "/usr/local/etc/redis/redis.conf", "--requirepass", redisPW}, rdCmd...),
			persistenceArgs(ep.RedisPersistence)...),
		[]string{rconf + ":/usr/local/etc/redis/redis.conf:ro"}); err != nil {
		return ep, err
	}
	myAddr, rdAddr := net.JoinHostPort(host, strconv.Itoa(myPort)), net.JoinHostPort(host, strconv.Itoa(rdPort))
	if len(ep.RedisCluster) > 0 {
		rdAddr = ep.RedisCluster[0]
	}
	if d.Network != NetworkHost {
		myAddr, rdAddr = my.GetHostPort("3306/tcp"), rd.GetHostPort("6379/tcp")
	}
	ep.Network = d.Network
	if p := d.netPath(); p != nil {
		if err := p.Shape(netpath.StoreMySQL, myPort); err != nil {
			return ep, err
		}
		if err := p.Shape(netpath.StoreRedis, rdPort); err != nil {
			return ep, err
		}
		if err := p.Set(ctx, d.Profile); err != nil {
			return ep, err
		}
		ep.Network, ep.Netns = NetworkNetns, p.Name()
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = "root", pw, "tcp", myAddr, "stockbench"
	ep.MySQLDSN = WithDriverParams(cfg.FormatDSN())
	ep.RedisAddr, ep.RedisPassword = rdAddr, redisPW
	myCPU, rdCPU := d.watchCPU(my.Container.ID), d.watchCPU(rd.Container.ID)
	d.mu.Lock()
	d.watches = append(d.watches, myCPU, rdCPU)
	d.mu.Unlock()
	ep.CPU = map[string]func() (time.Duration, time.Time, bool){"mysql": myCPU.latest, "redis": rdCPU.latest}
	var nodes []*dockerRole
	if len(rdMore) > 0 {
		var ws []*cpuWatch
		ep.CPU["redis"], ws = d.watchNodesCPU(rdCPU, rdMore)
		for i, r := range append([]*dockertest.Resource{rd}, rdMore...) {
			nodes = append(nodes, &dockerRole{res: r, cpu: ws[i], port: "6379/tcp", addr: ep.RedisCluster[i]})
		}
	}
	d.mu.Lock()
	d.roles = map[string]*dockerRole{TargetMySQL: {res: my, cpu: myCPU, port: "3306/tcp", addr: myAddr},
		TargetRedis: {res: rd, cpu: rdCPU, port: "6379/tcp", addr: rdAddr}}
	if d.RedisCluster > 0 {
		// One node's fault is not the run's Redis stalling (dockerfaulter.go).
		delete(d.roles, TargetRedis)
	}
	d.redisNodes = nodes
	d.ep = ep
	d.mu.Unlock()

	deadline := time.Now().Add(dockerStartDeadline)
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = Ping(pctx, ep, 5*time.Second)
		cancel()
		if err == nil {
			return ep, nil
		}
		if ctx.Err() != nil {
			return ep, ctx.Err()
		}
		for _, r := range append([]*dockertest.Resource{my, rd}, rdMore...) {
			c, ierr := d.pool.Client.InspectContainer(r.Container.ID)
			if ierr == nil && !c.State.Running {
				return ep, fmt.Errorf("docker: container %s (%s) %w with code %d", c.Name, c.Config.Image, errContainerExited, c.State.ExitCode)
			}
		}
		if time.Now().After(deadline) {
			return ep, fmt.Errorf("docker: servers not ready after %s: %v", dockerStartDeadline, err)
		}
	}
}

// startHolder starts the container that owns the servers' network
// namespace (network none: only its loopback) and attaches the run's
// network path to it; it returns the address the servers listen on.
// The holder runs sleep from the Redis image (both images are Debian
// based); a server container that a fault restarts rejoins the same
// namespace, so the path and its rules outlive it.
func (d *Docker) startHolder(ctx context.Context) (string, error) {
	if d.Network != NetworkHost {
		return "", fmt.Errorf("docker: a network profile needs an engine on this machine's kernel (host networking), not %s", d.Network)
	}
	repo, tag := splitImage(d.RedisImage)
	r, err := d.pool.RunWithOptions(&dockertest.RunOptions{
		Repository: repo, Tag: tag, Entrypoint: []string{"sleep"}, Cmd: []string{"infinity"},
		Labels: map[string]string{Label: "1", LabelPID: strconv.Itoa(os.Getpid())},
	}, func(hc *dc.HostConfig) {
		hc.AutoRemove = false
		hc.RestartPolicy = dc.RestartPolicy{Name: "no"}
		hc.PublishAllPorts = false
		hc.NetworkMode = "none"
	})
	if err != nil {
		return "", fmt.Errorf("docker: start the network holder (%s): %w", d.RedisImage, err)
	}
	d.mu.Lock()
	d.resources = append(d.resources, r)
	d.holder = r
	d.mu.Unlock()
	c, err := d.pool.Client.InspectContainerWithContext(r.Container.ID, ctx)
	if err != nil {
		return "", fmt.Errorf("docker: inspect the network holder: %w", err)
	}
	if !c.State.Running || c.State.Pid <= 0 {
		return "", fmt.Errorf("docker: the network holder %w with code %d", errContainerExited, c.State.ExitCode)
	}
	p, err := netpath.Attach(ctx, c.State.Pid)
	if err != nil {
		return "", fmt.Errorf("docker: %w", err)
	}
	d.mu.Lock()
	d.path = p
	d.mu.Unlock()
	return p.Addr(), nil
}

func (d *Docker) netPath() *netpath.Path {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.path
}

// SetNetwork changes the profile of servers started with one (a sweep
// over RTT): the same containers, the same path, new delays from now on.
func (d *Docker) SetNetwork(ctx context.Context, pr netpath.Profile) error {
	p := d.netPath()
	if p == nil {
		return errors.New("docker: started without a network profile")
	}
	return p.Set(ctx, pr)
}

// NetworkStats are the network path's shaper counts per store (nil
// without a profile).
func (d *Docker) NetworkStats() map[string]netpath.Stats {
	if p := d.netPath(); p != nil {
		return p.Stats()
	}
	return nil
}

// run starts one labelled container: in the host's network namespace,
// with its port published on 127.0.0.1, or, with a Profile, in the
// holder's namespace.
func (d *Docker) run(image, port string, env, cmd, mounts []string) (*dockertest.Resource, error) {
	repo, tag := splitImage(image)
	opts := &dockertest.RunOptions{
		Repository: repo, Tag: tag, Env: env, Cmd: cmd, Mounts: mounts,
		Labels: map[string]string{Label: "1", LabelPID: strconv.Itoa(os.Getpid())},
	}
	d.mu.Lock()
	holder := d.holder
	d.mu.Unlock()
	if holder == nil && d.Network != NetworkHost {
		opts.ExposedPorts = []string{port}
		opts.PortBindings = map[dc.Port][]dc.PortBinding{dc.Port(port): {{HostIP: "127.0.0.1", HostPort: ""}}}
	}
	r, err := d.pool.RunWithOptions(opts, func(hc *dc.HostConfig) {
		hc.PublishAllPorts = false
		hc.AutoRemove = false
		hc.RestartPolicy = dc.RestartPolicy{Name: "no"}
		if holder != nil {
			hc.NetworkMode = "container:" + holder.Container.ID
		} else if d.Network == NetworkHost {
			hc.NetworkMode = "host"
		}
	})
	if err != nil {
		return nil, fmt.Errorf("docker: start %s: %w", image, err)
	}
	d.mu.Lock()
	d.resources = append(d.resources, r)
	d.mu.Unlock()
	if d.Network == NetworkHost || holder != nil {
		return r, nil
	}
	if hp := r.GetHostPort(port); hp == "" {
		return nil, fmt.Errorf("docker: %s published no port", image)
	} else if host, _, _ := net.SplitHostPort(hp); host != "127.0.0.1" {
		return nil, fmt.Errorf("docker: %s published on %s, not 127.0.0.1", image, host)
	}
	return r, nil
}

// Stop removes the containers (and their volumes), the network path and
// the config files. It is safe to call more than once.
func (d *Docker) Stop() error {
	d.mu.Lock()
	rs := d.resources
	d.resources = nil
	dir := d.confDir
	d.confDir = ""
	watches := d.watches
	d.watches = nil
	path := d.path
	d.path, d.holder = nil, nil
	d.mu.Unlock()
	for _, w := range watches {
		w.close()
	}
	var errs []error
	// Last started first: the servers go before the holder whose
	// namespace they share.
	for i := len(rs) - 1; i >= 0; i-- {
		r := rs[i]
		// A container paused by a fault is thawed first: removal kills it.
		_ = d.pool.Client.UnpauseContainer(r.Container.ID)
		if err := d.pool.Purge(r); err != nil {
			errs = append(errs, err)
		}
	}
	if path != nil {
		errs = append(errs, path.Close())
	}
	if dir != "" {
		errs = append(errs, os.RemoveAll(dir))
	}
	return errors.Join(errs...)
}

// Down removes every container that carries the stockbench label, running
// or not, and returns their names.
//
// A container whose stockbench.pid names a process that still runs on this
// host belongs to a live run (or test) and is kept: its names are returned
// in kept.
func Down() (removed, kept []string, err error) {
	pool, err := dockerPool()
	if err != nil {
		return nil, nil, err
	}
	cs, err := pool.Client.ListContainers(dc.ListContainersOptions{All: true, Filters: map[string][]string{"label": {Label}}})
	if err != nil {
		return nil, nil, fmt.Errorf("docker: list containers: %w", err)
	}
	for _, c := range cs {
		name := strings.TrimPrefix(strings.Join(c.Names, ","), "/")
		if pid, err := strconv.Atoi(c.Labels[LabelPID]); err == nil && processAlive(pid) {
			kept = append(kept, fmt.Sprintf("%s (pid %d)", name, pid))
			continue
		}
		if err := pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true, RemoveVolumes: true}); err != nil {
			return removed, kept, fmt.Errorf("docker: remove %s: %w", c.ID[:12], err)
		}
		removed = append(removed, name)
	}
	return removed, kept, nil
}

// downMatching removes the containers whose labels match filter ("key" or
// "key=value").
func downMatching(filter string) ([]string, error) {
	pool, err := dockerPool()
	if err != nil {
		return nil, err
	}
	cs, err := pool.Client.ListContainers(dc.ListContainersOptions{All: true, Filters: map[string][]string{"label": {filter}}})
	if err != nil {
		return nil, fmt.Errorf("docker: list containers: %w", err)
	}
	var names []string
	for _, c := range cs {
		if err := pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true, RemoveVolumes: true}); err != nil {
			return names, fmt.Errorf("docker: remove %s: %w", c.ID[:12], err)
		}
		names = append(names, strings.TrimPrefix(strings.Join(c.Names, ","), "/"))
	}
	return names, nil
}

// cpuWatch follows a container's CPU time through the engine's stats
// stream (one sample a second) and keeps the latest sample. A restarted
// container's stream ends; follow starts another into the same watch.
type cpuWatch struct {
	mu     sync.Mutex
	cpu    time.Duration
	at     time.Time
	stop   chan bool
	wg     sync.WaitGroup
	loaded bool
}

func (d *Docker) watchCPU(id string) *cpuWatch {
	w := &cpuWatch{stop: make(chan bool)}
	d.follow(w, id)
	return w
}

func (d *Docker) follow(w *cpuWatch, id string) {
	ch := make(chan *dc.Stats)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		// No Timeout: the client applies it as a deadline on the whole
		// stream, which then stops after that long (seen: samples froze 10 s
		// after start).
		_ = d.pool.Client.Stats(dc.StatsOptions{ID: id, Stats: ch, Stream: true, Done: w.stop})
	}()
	go func() {
		for s := range ch {
			w.mu.Lock()
			w.cpu, w.at, w.loaded = time.Duration(s.CPUStats.CPUUsage.TotalUsage), s.Read, true
			w.mu.Unlock()
		}
	}()
}

// latest returns the newest sample; ok is false when there is none or it
// is stale (the stream stopped).
func (w *cpuWatch) latest() (time.Duration, time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cpu, w.at, w.loaded && time.Since(w.at) < 3*time.Second
}

func (w *cpuWatch) close() {
	close(w.stop)
	w.wg.Wait()
}
