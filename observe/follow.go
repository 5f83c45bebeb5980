package observe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// A parent of several generators (--procs N) plays no load: its endpoint
// re-exposes its generators' own endpoints. Each generator listens on a
// port of its own (127.0.0.1:0), labels every series generator="I"
// (ListenAs) and writes the address it got into a file (WriteAddr); the
// parent reads that file and scrapes the generator whenever it is scraped
// itself (Follow), so a Prometheus scraping the parent sees every
// generator's flows, operations and latencies, each under its generator.

// addrFileName is the file a generator writes its endpoint's address to,
// in its output directory.
const addrFileName = "metrics.addr"

// AddrFile is where a generator writing into dir puts its address.
func AddrFile(dir string) string { return strings.TrimSuffix(dir, "/") + "/" + addrFileName }

// WriteAddr writes the endpoint's address into file, for a parent that
// follows it (written whole, then renamed, so a reader never sees half).
func (e *Exporter) WriteAddr(file string) error {
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(e.Addr()+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// followed is one generator the exporter re-exposes.
type followed struct {
	gen, addrFile string

	mu    sync.Mutex
	addr  string
	last  []*dto.MetricFamily // the last families read from it
	ended bool
}

// Follow re-exposes, on e, the endpoint of generator gen, whose address it
// writes into addrFile once it listens (nothing until then). The returned
// func is called when the generator ended: its run's series then stay at
// the last figures read from it (its process's and Go runtime's go, since
// a later generator of the same index would repeat them).
func (e *Exporter) Follow(gen, addrFile string) (ended func()) {
	f := &followed{gen: gen, addrFile: addrFile}
	e.mu.Lock()
	e.follow = append(e.follow, f)
	e.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.ended = true
		f.last = runFamilies(f.last)
	}
}

// gatherFollowed reads every followed generator: a live one scraped now
// (its last figures when it does not answer), an ended one as it last was.
func (e *Exporter) gatherFollowed() ([]*dto.MetricFamily, error) {
	e.mu.Lock()
	fs := append([]*followed{}, e.follow...)
	e.mu.Unlock()
	var out []*dto.MetricFamily
	var errs []error
	for _, f := range fs {
		mfs, err := f.gather()
		if err != nil {
			errs = append(errs, fmt.Errorf("generator %s: %w", f.gen, err))
		}
		out = append(out, mfs...)
	}
	return out, errors.Join(errs...)
}

func (f *followed) gather() ([]*dto.MetricFamily, error) {
	f.mu.Lock()
	ended, addr, last := f.ended, f.addr, f.last
	f.mu.Unlock()
	if ended {
		return last, nil
	}
	if addr == "" {
		b, err := os.ReadFile(f.addrFile)
		if err != nil {
			return last, nil // not listening yet
		}
		addr = strings.TrimSpace(string(b))
	}
	mfs, err := scrapeFamilies(addr)
	if err != nil {
		return last, err
	}
	labelled(mfs, f.gen)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addr = addr
	if f.ended { // it ended while we read it
		return f.last, nil
	}
	f.last = mfs
	return mfs, nil
}

// scrapeFamilies reads an endpoint's families, in the protobuf format so
// that native histograms come across whole.
func scrapeFamilies(addr string) ([]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", addr, resp.Status)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	var out []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
		out = append(out, mf)
	}
}

// labelled gives every series of mfs the generator label (a generator
// already carries it: ListenAs; one that does not gets it here).
func labelled(mfs []*dto.MetricFamily, gen string) {
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			has := false
			for _, lp := range m.Label {
				has = has || lp.GetName() == GeneratorLabel
			}
			if !has {
				m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(GeneratorLabel), Value: proto.String(gen)})
			}
		}
	}
}

// runFamilies keeps the series of runs (those labelled by strategy): what
// an ended generator leaves on its parent's endpoint.
func runFamilies(mfs []*dto.MetricFamily) []*dto.MetricFamily {
	var out []*dto.MetricFamily
	for _, mf := range mfs {
		var ms []*dto.Metric
		for _, m := range mf.Metric {
			for _, lp := range m.Label {
				if lp.GetName() == "strategy" {
					ms = append(ms, m)
					break
				}
			}
		}
		if len(ms) > 0 {
			c := proto.Clone(mf).(*dto.MetricFamily)
			c.Metric = ms
			out = append(out, c)
		}
	}
	return out
}
