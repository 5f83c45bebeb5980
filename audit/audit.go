// Package audit is the project's main claim in code: the auditor grades the
// stores after a run — oversold and leaked units, every kind of broken
// acknowledgement, Redis drift, orphan and stale reservations — by reading
// MySQL and Redis directly. It never asks a strategy anything; it knows only
// the shared layout (inventory). Runs use it twice (end of load, after
// settle); `stockbench audit` runs it on any database.
package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/inventory"
)

// FieldDrift is, per field, Redis minus what MySQL says Redis should hold.
type FieldDrift struct {
	Total     int64 `json:"total"`
	Available int64 `json:"available"`
	Occupied  int64 `json:"occupied"`
	Sold      int64 `json:"sold"`
}

// Units is the sum of the absolute differences.
func (d FieldDrift) Units() int64 {
	return abs(d.Total) + abs(d.Available) + abs(d.Occupied) + abs(d.Sold)
}

// RedisStock is a SKU's stock hash as the auditor read it.
type RedisStock struct {
	Total     int64 `json:"total"`
	Available int64 `json:"available"`
	Occupied  int64 `json:"occupied"`
	Sold      int64 `json:"sold"`
}

// SKUAudit is the audit of one SKU. All unit figures are counted from the
// stores and the harness's ledger, never taken from the strategy.
type SKUAudit struct {
	SKU string `json:"sku"`
	// Ledger is the stock the harness put in: initial + the journalled
	// restocks it issued (without a ledger, the MySQL total).
	Ledger int64 `json:"ledger"`
	// Total, Available, Occupied and Sold are MySQL's view: the inventory
	// row plus the outbox events not yet applied to it, plus the SKU's
	// stock buckets and unit rows (layout.go).
	Total     int64 `json:"total"`
	Available int64 `json:"available"`
	Occupied  int64 `json:"occupied"`
	Sold      int64 `json:"sold"`
	// PendingEvents counts the outbox events not yet applied to the row.
	PendingEvents  int64 `json:"pending_events"`
	ConfirmedUnits int64 `json:"confirmed_units"`
	// ReservedUnits are the units of orders reserved in MySQL.
	ReservedUnits int64 `json:"reserved_units"`
	OversoldUnits int64 `json:"oversold_units"`
	LeakedUnits   int64 `json:"leaked_units"`
	PhantomUnits  int64 `json:"phantom_units"`
	// OverReleasedUnits are the units taken off sold beyond what the
	// orders account for: confirmed orders' units less sold, where
	// positive — a refund (or any release from sold) counted twice.
	OverReleasedUnits int64 `json:"over_released_units"`
	// Redis figures, present only when the strategy keeps stock in Redis.
	Redis *RedisStock `json:"redis,omitempty"`
	// RedisReservedUnits are the units of live Redis reservations.
	RedisReservedUnits int64       `json:"redis_reserved_units"`
	Drift              *FieldDrift `json:"drift,omitempty"`
	DriftUnits         int64       `json:"drift_units"`
	OrphanReservations int         `json:"orphan_reservations"`
	StaleReservations  int         `json:"stale_reservations"`
	// DeviationUnits is, per field summed, |Redis - the MySQL inventory row
	// as stored| (outbox events not yet applied left out; with reservations
	// in Redis only, the units undecided reservations hold moved to
	// occupied): what a production reconciliation job compares. An
	// eventually consistent strategy shows some while its relay works;
	// it is no anomaly class of its own (the periodic audit's threshold
	// reads it).
	DeviationUnits int64 `json:"deviation_units,omitempty"`
	// row is the inventory row as stored.
	row inventory.Stock
}

// Audit is the auditor's verdict on the stores at one moment. Each anomaly
// count is the field of one row of Classes (by its JSON key).
type Audit struct {
	ConfirmedUnits int64   `json:"confirmed_units"`
	OversoldUnits  int64   `json:"oversold_units"`
	OversellRate   float64 `json:"oversell_rate"`
	LeakedUnits    int64   `json:"leaked_units"`
	PhantomUnits   int64   `json:"phantom_units"`
	// OverReleasedUnits sums SKUAudit.OverReleasedUnits: units released
	// from sold twice (the article's 多释放: a cancel and a refund, or two
	// refunds, of one order both giving its units back).
	OverReleasedUnits int64 `json:"over_released_units"`
	// InvariantViolations counts broken rules of either store (a missing
	// Redis stock hash is one).
	InvariantViolations int `json:"invariant_violations"`
	// MissingRedisStock counts SKUs without a Redis stock hash.
	MissingRedisStock int `json:"missing_redis_stock"`
	// LostAcks counts confirm acks whose order is neither confirmed nor
	// refunded (a refund follows a confirm), and
	// acknowledged restocks the restock journal lacks.
	LostAcks int `json:"lost_acks"`
	// ReserveAckViolations counts reserve acks no store holds a
	// reservation (or a decision) for.
	ReserveAckViolations int `json:"reserve_ack_violations"`
	// CancelAckViolations counts cancel acks whose order is confirmed,
	// refunded (it was confirmed, so the cancel released nothing) or still
	// reserved.
	CancelAckViolations int `json:"cancel_ack_violations"`
	// RefundAckViolations counts refund acks whose order is not refunded
	// in MySQL (lost, or the order ended cancelled or expired: its units
	// were then given back by two releases the clients were told of).
	RefundAckViolations int `json:"refund_ack_violations"`
	// RefusedAfterReserve counts confirms refused after a successful
	// reserve: for lack of stock, as an unknown order, or as already final
	// (cancelled, expired) before the reservation's deadline (the client
	// ledger decides which refusals these are: inventory.AckRefused).
	RefusedAfterReserve int   `json:"refused_after_reserve"`
	DriftUnits          int64 `json:"drift_units"`
	// OrphanReservations are Redis reservations holding units for an order
	// MySQL does not hold as reserved (none, or already decided), and MySQL
	// reservations Redis does not hold.
	OrphanReservations int `json:"orphan_reservations"`
	// StaleReservations are live Redis reservations whose deadline passed
	// before the audit's StaleBefore.
	StaleReservations int `json:"stale_reservations"`
	// ProbeViolations counts the snapshots taken during load (Probe) in
	// which a store broke an invariant that must hold at every instant;
	// Probe says when (first, worst, last). Set by the runner, which runs
	// the probe beside the load; zero for an audit without one.
	ProbeViolations int          `json:"probe_violations"`
	Probe           *ProbeReport `json:"probe,omitempty"`
	// UnsoldUnits (undersell, the mirror of oversell) are the units a
	// one-SKU sale left unsold while buyers were turned away (refused,
	// shed or timed out). The harness counts it from what its clients
	// were told (results.Flash) and sets it after the audit; the auditor
	// cannot tell a buyer turned away from one who never came.
	UnsoldUnits int64 `json:"unsold_units"`
	// OverLimitUnits are the units buyers hold of a SKU beyond the
	// per-buyer limit (Auditor.LimitPerBuyer): per (SKU, buyer), the units
	// of its orders MySQL holds as reserved or confirmed — plus, with
	// RedisReservations, those of its live Redis reservations MySQL has no
	// order for — less the limit, where positive; summed.
	OverLimitUnits int64 `json:"over_limit_units"`
	// Anomalies is the sum of the UNSAFE classes' counts (Classes, units
	// and counts alike): zero means the auditor found nothing wrong.
	Anomalies  int64    `json:"anomalies"`
	Violations []string `json:"violations,omitempty"`
	// SKUsAudited is how many SKUs the audit read; SKUsWithAnomaly how
	// many of them showed an anomaly of any class.
	SKUsAudited     int64 `json:"skus_audited"`
	SKUsWithAnomaly int64 `json:"skus_with_anomaly"`
	// DeviationUnits sums SKUAudit.DeviationUnits over every SKU;
	// MaxSKUDeviation is the largest one SKU showed (MaxDeviationSKU).
	DeviationUnits  int64  `json:"deviation_units,omitempty"`
	MaxSKUDeviation int64  `json:"max_sku_deviation,omitempty"`
	MaxDeviationSKU string `json:"max_deviation_sku,omitempty"`
	// SKUs is the detail of every SKU when at most MaxSKUDetails were
	// audited; of a larger catalog, the first MaxSKUDetails SKUs (in SKU
	// order) that showed an anomaly, so its size is bounded.
	SKUs []SKUAudit `json:"skus"`
}

// maxViolationTexts caps the violation descriptions kept in an Audit.
const maxViolationTexts = 20

// Auditor grades the stores by reading MySQL (and Redis, when Redis is not
// nil) directly. It is independent of every strategy: it knows only the
// shared layout. It only reads; it is safe for concurrent use, and an audit
// is meaningful when no operation is in flight.
type Auditor struct {
	DB *sql.DB
	// restocked is what the journalled restocks the harness issued added
	// to Ledger, per SKU (ledgerOf); set by AuditFrom.
	restocked map[string]int64
	// Redis is the Redis of a strategy that keeps stock there; nil when the
	// strategy keeps none (then Redis is not checked at all).
	Redis redis.UniversalClient
	// Ledger is the stock the harness put in per SKU before any restock
	// (the initial stock); the audit adds the restock journal rows whose
	// ids the acks name as restocks the harness issued (see ledgerOf): the
	// total every store must show. Nil: the MySQL total is taken as the
	// ledger (the audit command, on stores it did not fill).
	Ledger map[string]int64
	// RedisReservations says reservations live only in Redis until decided
	// (lua-tcc's TCC Try): a live Redis reservation then needs no MySQL
	// order, and MySQL's available includes the units it holds.
	RedisReservations bool
	// LimitPerBuyer, when positive, is the units one buyer may hold of a
	// SKU: the audit counts what buyers hold beyond it (OverLimitUnits).
	LimitPerBuyer int64
	// StaleBefore, when set, makes a live Redis reservation whose deadline
	// is before it an anomaly (an audit after Settle passes the time Settle
	// began: every reservation due then should have been released).
	StaleBefore time.Time
	// Progress, when set, is called as the audit goes with the SKUs and
	// acks checked so far and their total (from the same goroutine as
	// Audit, never concurrently).
	Progress func(done, total int64)
}

type sink struct{ out *Audit }

func (k sink) violate(format string, args ...any) {
	k.out.InvariantViolations++
	k.note(format, args...)
}

func (k sink) note(format string, args ...any) {
	if len(k.out.Violations) < maxViolationTexts {
		k.out.Violations = append(k.out.Violations, fmt.Sprintf(format, args...))
	}
}

// MaxSKUDetails bounds Audit.SKUs: an audit of at most this many SKUs keeps
// every SKU's detail; a larger one keeps only SKUs with an anomaly, the
// first MaxSKUDetails of them in SKU order, and totals for the rest.
const MaxSKUDetails = 100

// batchSKUs is how many SKUs the auditor reads from Redis, and looks up
// orders for, in one round trip.
const batchSKUs = 1000

// Audit reads the stores and checks them against the ledger and against
// acks, what clients were told. Its cost is linear in SKUs + orders +
// acks: MySQL is read in one set-based pass over the inventory (orders
// and unapplied outbox events grouped per SKU, streamed in SKU order),
// Redis in pipelined batches of SKUs (on a Redis Cluster, go-redis sends
// each batch's commands to every master at once), and orders by primary
// key in batches; no statement is issued per SKU. Memory holds one batch
// of SKUs and the detail of at most MaxSKUDetails of them.
func (a Auditor) Audit(ctx context.Context, acks []inventory.Ack) (Audit, error) {
	return a.AuditFrom(ctx, AckSlice(acks))
}

// AuditFrom is Audit with the acknowledgements read from src batch by batch
// (a run's acks stream from disk; see AckSource).
func (a Auditor) AuditFrom(ctx context.Context, acks AckSource) (Audit, error) {
	var out Audit
	k := sink{&out}
	if a.Ledger != nil {
		// The ledger the stores are graded against: the initial stock plus
		// the journalled restocks the harness issued.
		restocked, err := a.ledgerOf(ctx, acks, &out, k)
		if err != nil {
			return out, err
		}
		a.restocked = restocked
	}
	var total int64
	if a.Progress != nil {
		if a.Ledger != nil {
			total = int64(a.ledgerLen())
		} else if err := a.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM inventory").Scan(&total); err != nil {
			return out, fmt.Errorf("audit: count inventory: %w", err)
		}
		if n, ok := acks.(interface{ Len() int }); ok {
			total += int64(n.Len())
		}
		a.Progress(0, total)
	}
	var all, bad []SKUAudit
	ledgerSeen := 0
	var done int64
	finish := func(s *SKUAudit, before int) {
		if _, ok := a.ledgerSKU(s.SKU); ok {
			ledgerSeen++
		}
		out.SKUsAudited++
		out.ConfirmedUnits += s.ConfirmedUnits
		out.OversoldUnits += s.OversoldUnits
		out.LeakedUnits += s.LeakedUnits
		out.PhantomUnits += s.PhantomUnits
		out.OverReleasedUnits += s.OverReleasedUnits
		out.DriftUnits += s.DriftUnits
		out.OrphanReservations += s.OrphanReservations
		out.StaleReservations += s.StaleReservations
		out.DeviationUnits += s.DeviationUnits
		if s.DeviationUnits > out.MaxSKUDeviation {
			out.MaxSKUDeviation, out.MaxDeviationSKU = s.DeviationUnits, s.SKU
		}
		anomalous := out.InvariantViolations > before || s.OversoldUnits > 0 || s.LeakedUnits > 0 || s.PhantomUnits > 0 || s.OverReleasedUnits > 0 ||
			s.DriftUnits > 0 || s.OrphanReservations > 0 || s.StaleReservations > 0
		if anomalous {
			out.SKUsWithAnomaly++
			if len(bad) < MaxSKUDetails {
				bad = append(bad, *s)
			}
		}
		if out.SKUsAudited <= MaxSKUDetails {
			all = append(all, *s)
		}
	}
	layout, err := layoutDeltas(ctx, a.DB)
	if err != nil {
		return out, err
	}
	// The units buyers hold in live Redis reservations MySQL has no order
	// for (lua-tcc's, outbox-local's in flight), per (SKU, buyer): the
	// per-buyer limit is checked over them too (checkLimit).
	redisHolds := map[[2]string]int64{}
	err = a.scanInventory(ctx, func(batch []SKUAudit, reserved [][]string) error {
		var rd *redisBatch
		if a.Redis != nil {
			var err error
			if rd, err = a.readRedis(ctx, batch); err != nil {
				return err
			}
		}
		for i := range batch {
			s := &batch[i]
			before := out.InvariantViolations
			addLayout(s, layout, k)
			a.checkSKU(s, k)
			if rd != nil {
				a.checkRedis(s, rd, i, reserved[i], k)
				a.redisOnlyHolds(s.SKU, rd, i, redisHolds)
			}
			if s.LeakedUnits > 0 {
				k.note("%s: %d units leaked (in no available, reserved or sold count)", s.SKU, s.LeakedUnits)
			}
			if s.PhantomUnits > 0 {
				k.note("%s: %d phantom units (beyond the ledger's %d)", s.SKU, s.PhantomUnits, s.Ledger)
			}
			if s.OverReleasedUnits > 0 {
				k.note("%s: %d units released from sold twice (sold %d < confirmed orders %d)", s.SKU, s.OverReleasedUnits, s.Sold, s.ConfirmedUnits)
			}
			finish(s, before)
		}
		done += int64(len(batch))
		if a.Progress != nil {
			a.Progress(done, max(total, done))
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	if ledgerSeen < a.ledgerLen() {
		if err := a.missingFromMySQL(ctx, k); err != nil {
			return out, err
		}
	}
	if out.SKUsAudited <= MaxSKUDetails {
		out.SKUs = all
	} else {
		out.SKUs = bad
	}
	if out.SKUs == nil {
		out.SKUs = []SKUAudit{}
	}
	if out.ConfirmedUnits > 0 {
		out.OversellRate = float64(out.OversoldUnits) / float64(out.ConfirmedUnits)
	}
	if err := a.checkLimit(ctx, &out, k, redisHolds); err != nil {
		return out, err
	}
	if err := a.checkAcks(ctx, &out, k, acks, func(n int) {
		done += int64(n)
		if a.Progress != nil {
			a.Progress(done, max(total, done))
		}
	}); err != nil {
		return out, err
	}
	out.Recount()
	return out, nil
}

// inventoryQuery reads every SKU's inventory row with its orders and its
// unapplied outbox events folded in, in one pass: each of orders and
// outbox is grouped by SKU once and joined to the inventory, which is read
// in primary-key order. %s is the list of a SKU's reserved order ids
// (GROUP_CONCAT) when the audit needs them, else NULL.
const inventoryQuery = `
SELECT i.sku, i.total, i.available, i.occupied, i.sold,
       COALESCE(o.confirmed,0), COALESCE(o.reserved,0), %s,
       COALESCE(e.da,0), COALESCE(e.do,0), COALESCE(e.ds,0), COALESCE(e.n,0)
FROM inventory i
LEFT JOIN (SELECT sku,
                  SUM(CASE WHEN state='confirmed' THEN qty ELSE 0 END) AS confirmed,
                  SUM(CASE WHEN state='reserved' THEN qty ELSE 0 END) AS reserved,
                  GROUP_CONCAT(CASE WHEN state='reserved' THEN order_id END SEPARATOR ' ') AS ids
           FROM orders GROUP BY sku) o ON o.sku=i.sku
LEFT JOIN (SELECT sku,
                  SUM(CASE WHEN kind='reserve' THEN -qty WHEN kind IN ('release','refund') THEN qty ELSE 0 END) AS da,
                  SUM(CASE WHEN kind='reserve' THEN qty WHEN kind='refund' THEN 0 ELSE -qty END) AS do,
                  SUM(CASE WHEN kind='confirm' THEN qty WHEN kind='refund' THEN -qty ELSE 0 END) AS ds,
                  COUNT(*) AS n
           FROM outbox WHERE applied=0 GROUP BY sku) e ON e.sku=i.sku
ORDER BY i.sku`

// scanInventory streams the inventory query and calls fn with batches of
// at most batchSKUs SKUs (MySQL's view filled in: the row plus unapplied
// events; Row the row as stored) and, per SKU, its reserved order ids when
// the Redis check needs them. The reading and fn overlap: the next batch
// is read while fn works on this one.
func (a Auditor) scanInventory(ctx context.Context, fn func(batch []SKUAudit, reserved [][]string) error) error {
	wantIDs := a.Redis != nil && !a.RedisReservations
	ids := "NULL"
	conn, err := a.DB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("audit: read inventory: %w", err)
	}
	defer conn.Close()
	if wantIDs {
		ids = "o.ids"
		// A SKU's reserved ids in one value: the session allows 64 MiB.
		if _, err := conn.ExecContext(ctx, "SET SESSION group_concat_max_len = 67108864"); err != nil {
			return fmt.Errorf("audit: read inventory: %w", err)
		}
	}
	type part struct {
		skus     []SKUAudit
		reserved [][]string
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	parts := make(chan part, 2)
	var readErr error
	go func() {
		defer close(parts)
		readErr = func() error {
			rows, err := conn.QueryContext(ctx, fmt.Sprintf(inventoryQuery, ids))
			if err != nil {
				return fmt.Errorf("audit: read inventory: %w", err)
			}
			defer rows.Close()
			p := part{}
			for rows.Next() {
				var s SKUAudit
				var da, do, ds int64
				var idList sql.NullString
				if err := rows.Scan(&s.SKU, &s.Total, &s.Available, &s.Occupied, &s.Sold, &s.ConfirmedUnits, &s.ReservedUnits,
					&idList, &da, &do, &ds, &s.PendingEvents); err != nil {
					return fmt.Errorf("audit: scan inventory: %w", err)
				}
				s.row = inventory.Stock{SKU: s.SKU, Total: s.Total, Available: s.Available, Occupied: s.Occupied, Sold: s.Sold}
				s.Available, s.Occupied, s.Sold = s.Available+da, s.Occupied+do, s.Sold+ds
				p.skus = append(p.skus, s)
				var r []string
				if idList.Valid && idList.String != "" {
					r = strings.Fields(idList.String)
				}
				p.reserved = append(p.reserved, r)
				if len(p.skus) == batchSKUs {
					select {
					case parts <- p:
					case <-ctx.Done():
						return ctx.Err()
					}
					p = part{}
				}
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("audit: read inventory: %w", err)
			}
			if len(p.skus) > 0 {
				select {
				case parts <- p:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}()
	}()
	var fnErr error
	for p := range parts {
		if fnErr == nil {
			if fnErr = fn(p.skus, p.reserved); fnErr != nil {
				cancel()
			}
		}
	}
	if fnErr != nil {
		return fnErr
	}
	return readErr
}

// missingFromMySQL names the ledger's SKUs that have no inventory row
// (only called when some are missing), reading the inventory by primary
// key in batches.
func (a Auditor) missingFromMySQL(ctx context.Context, k sink) error {
	skus := a.ledgerSKUs()
	sort.Strings(skus)
	for start := 0; start < len(skus); start += 500 {
		part := skus[start:min(start+500, len(skus))]
		found := map[string]bool{}
		err := a.inBatch(ctx, "SELECT sku FROM inventory WHERE sku IN (%s)", part, func(rows *sql.Rows) error {
			var sku string
			if err := rows.Scan(&sku); err != nil {
				return err
			}
			found[sku] = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("audit: read inventory: %w", err)
		}
		for _, sku := range part {
			if !found[sku] {
				k.violate("mysql %s: no inventory row for a SKU the harness stocked", sku)
			}
		}
	}
	return nil
}

// inBatch runs query with its %s replaced by one placeholder per arg and
// calls fn for every row.
func (a Auditor) inBatch(ctx context.Context, query string, args []string, fn func(*sql.Rows) error) error {
	if len(args) == 0 {
		return nil
	}
	vals := make([]any, len(args))
	for i, v := range args {
		vals[i] = v
	}
	rows, err := a.DB.QueryContext(ctx, fmt.Sprintf(query, "?"+strings.Repeat(",?", len(args)-1)), vals...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// checkSKU grades one SKU's MySQL side against the ledger.
func (a Auditor) checkSKU(s *SKUAudit, k sink) {
	s.Ledger = s.Total
	if l, ok := a.ledgerSKU(s.SKU); ok {
		s.Ledger = l
		if s.Total != l {
			k.violate("mysql %s: total %d != ledger %d (initial + journalled restocks the harness issued)", s.SKU, s.Total, l)
		}
	}
	checkStock(k, "mysql", inventory.Stock{SKU: s.SKU, Total: s.Total, Available: s.Available, Occupied: s.Occupied, Sold: s.Sold})
	if s.Sold != s.ConfirmedUnits {
		k.violate("mysql %s: sold %d != confirmed orders %d", s.SKU, s.Sold, s.ConfirmedUnits)
	}
	if s.Occupied != s.ReservedUnits {
		k.violate("mysql %s: occupied %d != reserved orders %d", s.SKU, s.Occupied, s.ReservedUnits)
	}
	s.OversoldUnits = max(0, s.ConfirmedUnits-s.Ledger)
	s.OverReleasedUnits = max(0, s.ConfirmedUnits-s.Sold)
	held := s.Available + s.ReservedUnits + s.ConfirmedUnits
	s.LeakedUnits = max(0, s.Ledger-held)
	s.PhantomUnits = max(0, held-max(s.Ledger, s.ConfirmedUnits))
}

func checkStock(k sink, store string, s inventory.Stock) {
	if s.Available < 0 || s.Occupied < 0 || s.Sold < 0 {
		k.violate("%s %s: negative stock (available %d, occupied %d, sold %d)", store, s.SKU, s.Available, s.Occupied, s.Sold)
	}
	if s.Available+s.Occupied+s.Sold != s.Total {
		k.violate("%s %s: available %d + occupied %d + sold %d != total %d", store, s.SKU, s.Available, s.Occupied, s.Sold, s.Total)
	}
}

// redisReservation is a live Redis reservation.
type redisReservation struct {
	id       string
	qty      int64
	deadline time.Time
	buyer    string // "" for none
}

// redisBatch is what Redis and MySQL's orders hold for one batch of SKUs:
// per SKU (by index) its stock hash and live reservations, and the MySQL
// state of every order those reservations name.
type redisBatch struct {
	hash []map[string]string
	// broken, per SKU split over shards, names each shard whose own
	// counts break the stock invariant (a sum could hide it).
	broken [][]string
	live   [][]redisReservation
	states map[string]inventory.OrderState
}

// readRedis reads a batch of SKUs' stock hashes and live reservations in
// two pipelined round trips (hashes and live sets, then the reservation
// records), and the MySQL state of the orders they name by primary key.
func (a Auditor) readRedis(ctx context.Context, batch []SKUAudit) (*redisBatch, error) {
	out := &redisBatch{hash: make([]map[string]string, len(batch)), live: make([][]redisReservation, len(batch)), broken: make([][]string, len(batch))}
	pipe := a.Redis.Pipeline()
	hs := make([]*redis.MapStringStringCmd, len(batch))
	zs := make([]*redis.StringSliceCmd, len(batch))
	ss := make([]*redis.StringCmd, len(batch))
	for i, s := range batch {
		hs[i] = pipe.HGetAll(ctx, inventory.RedisStockKey(s.SKU))
		zs[i] = pipe.ZRange(ctx, inventory.RedisLiveKey(s.SKU), 0, -1)
		ss[i] = pipe.Get(ctx, inventory.RedisSplitKey(s.SKU))
	}
	// A SKU with no split key answers nil to its GET: not an error.
	_, _ = pipe.Exec(ctx)
	for i := range batch {
		for _, err := range []error{hs[i].Err(), zs[i].Err(), ss[i].Err()} {
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, fmt.Errorf("audit: redis stock: %w", err)
			}
		}
	}
	// lives[i] are SKU i's live order ids, by the stock hash ("SKU") they
	// live under: the SKU's own, or its shards' (RedisSplitKey).
	lives := make([][]shardLive, len(batch))
	var split []int
	for i, s := range batch {
		out.hash[i] = hs[i].Val()
		lives[i] = []shardLive{{s.SKU, zs[i].Val()}}
		if len(out.hash[i]) == 0 && len(strings.Fields(ss[i].Val())) > 0 {
			split = append(split, i)
		}
	}
	if err := a.readShards(ctx, out, lives, split, ss); err != nil {
		return nil, err
	}
	type ref struct{ sku, id int }
	var refs []ref
	var ids []string
	pipe = a.Redis.Pipeline()
	var rs []*redis.SliceCmd
	for i := range batch {
		for _, l := range lives[i] {
			for _, id := range l.ids {
				refs = append(refs, ref{i, len(ids)})
				ids = append(ids, id)
				rs = append(rs, pipe.HMGet(ctx, inventory.RedisReservationKey(l.shard, id), "qty", "state", "deadline", "buyer"))
			}
		}
	}
	if len(rs) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("audit: redis reservations: %w", err)
		}
	}
	var liveIDs []string
	for j, r := range refs {
		v := rs[j].Val()
		if st, _ := v[1].(string); st != string(inventory.StateReserved) {
			continue
		}
		q, _ := v[0].(string)
		d, _ := v[2].(string)
		n, _ := strconv.ParseInt(q, 10, 64)
		ms, _ := strconv.ParseInt(d, 10, 64)
		b, _ := v[3].(string)
		out.live[r.sku] = append(out.live[r.sku], redisReservation{id: ids[r.id], qty: n, deadline: time.UnixMilli(ms), buyer: b})
		liveIDs = append(liveIDs, ids[r.id])
	}
	rows, err := a.orders(ctx, liveIDs)
	if err != nil {
		return nil, err
	}
	out.states = make(map[string]inventory.OrderState, len(rows))
	for id, o := range rows {
		out.states[id] = o.state
	}
	return out, nil
}

// shardLive is the live order ids of one stock hash of a SKU.
type shardLive struct {
	shard string
	ids   []string
}

// readShards reads, in one pipeline, the shards' stock hashes and live
// sets of the SKUs of a batch (split) whose Redis stock is split over
// several hashes (their names in names[i], RedisSplitKey): the SKU's hash
// becomes the shards' sum of total, available, occupied and sold (left
// empty, so reported missing, when a shard's hash is missing), and its
// live reservations those of every shard.
func (a Auditor) readShards(ctx context.Context, out *redisBatch, lives [][]shardLive, split []int, names []*redis.StringCmd) error {
	if len(split) == 0 {
		return nil
	}
	pipe := a.Redis.Pipeline()
	type shardRead struct {
		name string
		h    *redis.MapStringStringCmd
		z    *redis.StringSliceCmd
	}
	reads := make(map[int][]shardRead, len(split))
	for _, i := range split {
		for _, name := range strings.Fields(names[i].Val()) {
			reads[i] = append(reads[i], shardRead{name, pipe.HGetAll(ctx, inventory.RedisStockKey(name)), pipe.ZRange(ctx, inventory.RedisLiveKey(name), 0, -1)})
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("audit: redis shards: %w", err)
	}
	fields := []string{"total", "available", "occupied", "sold"}
	for _, i := range split {
		sum := make([]int64, len(fields))
		missing := false
		for _, r := range reads[i] {
			h := r.h.Val()
			missing = missing || len(h) == 0
			var own [4]int64
			for f, name := range fields {
				v, err := strconv.ParseInt(h[name], 10, 64)
				missing = missing || err != nil
				sum[f] += v
				own[f] = v
			}
			if len(h) > 0 && (own[1] < 0 || own[2] < 0 || own[3] < 0 || own[1]+own[2]+own[3] != own[0]) {
				out.broken[i] = append(out.broken[i], fmt.Sprintf("%s (total %d available %d occupied %d sold %d)", r.name, own[0], own[1], own[2], own[3]))
			}
			lives[i] = append(lives[i], shardLive{r.name, r.z.Val()})
		}
		if missing {
			continue // reported as a missing (or broken) stock hash
		}
		out.hash[i] = make(map[string]string, len(fields))
		for f, name := range fields {
			out.hash[i][name] = strconv.FormatInt(sum[f], 10)
		}
	}
	return nil
}

// checkRedis checks SKU i of a batch: its Redis stock hash against its live
// reservations, the ledger and MySQL, field by field. reserved are the
// SKU's orders reserved in MySQL (read only when the strategy keeps a
// MySQL order for every Redis reservation).
func (a Auditor) checkRedis(s *SKUAudit, rd *redisBatch, i int, reserved []string, k sink) {
	h := rd.hash[i]
	if len(h) == 0 {
		k.out.MissingRedisStock++
		k.violate("redis %s: stock hash missing (every reserve fails; live data lost?)", s.SKU)
		return
	}
	var r RedisStock
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"total", &r.Total}, {"available", &r.Available}, {"occupied", &r.Occupied}, {"sold", &r.Sold}} {
		var err error
		if *f.dst, err = strconv.ParseInt(h[f.name], 10, 64); err != nil {
			k.violate("redis %s: field %s=%q is not a number", s.SKU, f.name, h[f.name])
		}
	}
	s.Redis = &r
	checkStock(k, "redis", inventory.Stock{SKU: s.SKU, Total: r.Total, Available: r.Available, Occupied: r.Occupied, Sold: r.Sold})
	for _, b := range rd.broken[i] {
		k.violate("redis %s: shard %s breaks available + occupied + sold = total, each >= 0", s.SKU, b)
	}
	var undecided int64 // live Redis units MySQL holds no order for
	inRedis := make(map[string]bool, len(rd.live[i]))
	for _, res := range rd.live[i] {
		inRedis[res.id] = true
		s.RedisReservedUnits += res.qty
		st, known := rd.states[res.id]
		switch {
		case !known && a.RedisReservations:
			undecided += res.qty
		case !known:
			s.OrphanReservations++
			k.note("redis %s: reservation %s holds %d units; MySQL has no order", s.SKU, res.id, res.qty)
		case st.Final():
			s.OrphanReservations++
			k.note("redis %s: reservation %s still holds %d units; MySQL order is %s", s.SKU, res.id, res.qty, st)
		}
		if !a.StaleBefore.IsZero() && res.deadline.Before(a.StaleBefore) {
			s.StaleReservations++
			k.note("redis %s: reservation %s past its deadline %s and still held", s.SKU, res.id, res.deadline.UTC().Format(time.RFC3339Nano))
		}
	}
	if r.Occupied != s.RedisReservedUnits {
		k.violate("redis %s: occupied %d != live reservations %d", s.SKU, r.Occupied, s.RedisReservedUnits)
	}
	if !a.RedisReservations {
		for _, id := range reserved {
			if !inRedis[id] {
				s.OrphanReservations++
				k.note("mysql %s: order %s reserved, but Redis holds no reservation for it", s.SKU, id)
			}
		}
	}
	// What MySQL says Redis should hold. With reservations in Redis only,
	// MySQL's available still counts the units undecided reservations hold.
	want := RedisStock{Total: s.Total, Available: s.Available, Occupied: s.Occupied, Sold: s.Sold}
	row := RedisStock{Total: s.row.Total, Available: s.row.Available, Occupied: s.row.Occupied, Sold: s.row.Sold}
	if a.RedisReservations {
		want.Available -= undecided
		want.Occupied += undecided
		row.Available -= undecided
		row.Occupied += undecided
	}
	d := diff(r, want)
	s.DriftUnits = d.Units()
	if s.DriftUnits > 0 {
		s.Drift = &d
		k.note("redis %s: drift from MySQL total %+d available %+d occupied %+d sold %+d", s.SKU, d.Total, d.Available, d.Occupied, d.Sold)
	}
	s.DeviationUnits = diff(r, row).Units()
	if ph := max(0, r.Available+r.Occupied+r.Sold-max(s.Ledger, s.ConfirmedUnits)); ph > s.PhantomUnits {
		s.PhantomUnits = ph
	}
}

// diff is, per field, got minus want.
func diff(got, want RedisStock) FieldDrift {
	return FieldDrift{Total: got.Total - want.Total, Available: got.Available - want.Available,
		Occupied: got.Occupied - want.Occupied, Sold: got.Sold - want.Sold}
}

type orderRow struct {
	state inventory.OrderState
	qty   int64
}

// orders reads the state and quantity of the given orders.
func (a Auditor) orders(ctx context.Context, ids []string) (map[string]orderRow, error) {
	ids = append([]string(nil), ids...)
	sort.Strings(ids)
	out := make(map[string]orderRow, len(ids))
	const batch = 500
	for start := 0; start < len(ids); start += batch {
		part := ids[start:min(start+batch, len(ids))]
		args := make([]any, len(part))
		for i, id := range part {
			args[i] = id
		}
		rows, err := a.DB.QueryContext(ctx, "SELECT order_id, state, qty FROM orders WHERE order_id IN (?"+strings.Repeat(",?", len(part)-1)+")", args...)
		if err != nil {
			return nil, fmt.Errorf("audit: read orders: %w", err)
		}
		for rows.Next() {
			var id string
			var o orderRow
			if err := rows.Scan(&id, &o.state, &o.qty); err != nil {
				rows.Close()
				return nil, fmt.Errorf("audit: scan orders: %w", err)
			}
			out[id] = o
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("audit: read orders: %w", err)
		}
	}
	return out, nil
}

// checkAcks counts acknowledgements that the stores contradict, one batch
// of acks at a time: the stores do not change during an audit, so reading
// each batch's orders apart gives what one read of them all would. done is
// told how many acks each batch checked.
func (a Auditor) checkAcks(ctx context.Context, out *Audit, k sink, acks AckSource, done func(n int)) error {
	err := acks.EachAck(ctx, func(batch []inventory.Ack) error {
		if err := a.checkAckBatch(ctx, out, k, batch); err != nil {
			return err
		}
		done(len(batch))
		return nil
	})
	if err != nil {
		return fmt.Errorf("audit: acks: %w", err)
	}
	return nil
}

func (a Auditor) checkAckBatch(ctx context.Context, out *Audit, k sink, acks []inventory.Ack) error {
	ids := make([]string, 0, len(acks))
	seen := make(map[string]bool, len(acks))
	for _, ack := range acks {
		if !ack.IsRestock() && !seen[ack.OrderID] {
			seen[ack.OrderID] = true
			ids = append(ids, ack.OrderID)
		}
	}
	rows, err := a.orders(ctx, ids)
	if err != nil {
		return err
	}
	var inRedis []inventory.Ack // reserve acks MySQL holds nothing for
	for _, ack := range acks {
		o, found := rows[ack.OrderID]
		switch ack.State {
		case inventory.StateConfirmed:
			// A refunded order was confirmed first: its confirm ack stands.
			if o.state != inventory.StateConfirmed && o.state != inventory.StateRefunded {
				out.LostAcks++
				k.note("order %s: confirm acknowledged, order is %q", ack.OrderID, o.state)
			}
		case inventory.StateRefunded:
			if o.state != inventory.StateRefunded {
				out.RefundAckViolations++
				k.note("order %s: refund acknowledged, order is %q", ack.OrderID, o.state)
			}
		case inventory.StateCancelled:
			if o.state == inventory.StateConfirmed || o.state == inventory.StateRefunded || o.state == inventory.StateReserved {
				out.CancelAckViolations++
				k.note("order %s: cancel acknowledged, order is %s", ack.OrderID, o.state)
			}
		case inventory.AckRefused:
			out.RefusedAfterReserve++
			k.note("order %s: confirm refused after its reserve succeeded (out of stock, unknown, or final before its deadline)", ack.OrderID)
		case inventory.StateReserved:
			if found && o.qty > 0 {
				continue
			}
			inRedis = append(inRedis, ack)
		}
	}
	held, err := a.heldInRedis(ctx, inRedis)
	if err != nil {
		return err
	}
	for i, ack := range inRedis {
		if !held[i] {
			out.ReserveAckViolations++
			k.note("order %s: reserve acknowledged, no store holds it (mysql %q)", ack.OrderID, rows[ack.OrderID].state)
		}
	}
	return nil
}

// heldInRedis reports, for each of acks, whether Redis holds a reservation
// record with units for the order (strategies whose reservations live in
// Redis), in one pipeline.
func (a Auditor) heldInRedis(ctx context.Context, acks []inventory.Ack) ([]bool, error) {
	held := make([]bool, len(acks))
	if a.Redis == nil || !a.RedisReservations || len(acks) == 0 {
		return held, nil
	}
	shards, err := a.splitShards(ctx, acks)
	if err != nil {
		return nil, err
	}
	pipe := a.Redis.Pipeline()
	cmds := make([][]*redis.SliceCmd, len(acks))
	for i, ack := range acks {
		if ack.SKU == "" {
			continue
		}
		names := shards[ack.SKU]
		if len(names) == 0 {
			names = []string{ack.SKU}
		}
		for _, name := range names {
			cmds[i] = append(cmds[i], pipe.HMGet(ctx, inventory.RedisReservationKey(name, ack.OrderID), "qty", "state"))
		}
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("audit: redis reservations: %w", err)
		}
	}
	for i, cs := range cmds {
		for _, c := range cs {
			q, _ := c.Val()[0].(string)
			n, _ := strconv.ParseInt(q, 10, 64)
			held[i] = held[i] || n > 0
		}
	}
	return held, nil
}

// splitShards reads the shard names of the acks' SKUs whose Redis stock is
// split (inventory.RedisSplitKey); a SKU kept in one hash has none.
func (a Auditor) splitShards(ctx context.Context, acks []inventory.Ack) (map[string][]string, error) {
	cmds := map[string]*redis.StringCmd{}
	pipe := a.Redis.Pipeline()
	for _, ack := range acks {
		if _, ok := cmds[ack.SKU]; !ok && ack.SKU != "" {
			cmds[ack.SKU] = pipe.Get(ctx, inventory.RedisSplitKey(ack.SKU))
		}
	}
	out := map[string][]string{}
	if len(cmds) == 0 {
		return out, nil
	}
	_, _ = pipe.Exec(ctx)
	for sku, c := range cmds {
		v, err := c.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("audit: redis split: %w", err)
		}
		out[sku] = strings.Fields(v)
	}
	return out, nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// redisOnlyHolds adds to holds the units of SKU i's live Redis
// reservations with a buyer that MySQL has no order for (strategies whose
// reservations live in Redis), when a per-buyer limit is audited.
func (a Auditor) redisOnlyHolds(sku string, rd *redisBatch, i int, holds map[[2]string]int64) {
	if a.LimitPerBuyer <= 0 || !a.RedisReservations {
		return
	}
	for _, res := range rd.live[i] {
		if _, known := rd.states[res.id]; !known && res.buyer != "" {
			holds[[2]string{sku, res.buyer}] += res.qty
		}
	}
}

// checkLimit counts the units buyers hold beyond LimitPerBuyer: from the
// orders table (one grouped pass over the orders that name a buyer), plus
// redisHolds, the units of live Redis reservations MySQL has no order for
// (per SKU and buyer), added to that buyer's MySQL holds.
func (a Auditor) checkLimit(ctx context.Context, out *Audit, k sink, redisHolds map[[2]string]int64) error {
	if a.LimitPerBuyer <= 0 {
		return nil
	}
	var buyers int64
	err := a.DB.QueryRowContext(ctx, `
SELECT COALESCE(SUM(h-?),0), COUNT(*) FROM (
  SELECT SUM(qty) AS h FROM orders
  WHERE buyer IS NOT NULL AND state IN ('reserved','confirmed')
  GROUP BY sku, buyer HAVING SUM(qty) > ?) x`, a.LimitPerBuyer, a.LimitPerBuyer).Scan(&out.OverLimitUnits, &buyers)
	if err != nil {
		return fmt.Errorf("audit: per-buyer limit: %w", err)
	}
	if len(redisHolds) > 0 {
		inMySQL, err := a.mysqlHolds(ctx, redisHolds)
		if err != nil {
			return err
		}
		for key, extra := range redisHolds {
			h := inMySQL[key]
			before, after := max(0, h-a.LimitPerBuyer), max(0, h+extra-a.LimitPerBuyer)
			if after > before {
				out.OverLimitUnits += after - before
				if before == 0 {
					buyers++
				}
				k.note("%s: buyer %s holds %d units (%d in Redis only) beyond the per-buyer limit of %d", key[0], key[1], h+extra, extra, a.LimitPerBuyer)
			}
		}
	}
	if out.OverLimitUnits > 0 {
		k.note("%d buyers hold %d units beyond the per-buyer limit of %d", buyers, out.OverLimitUnits, a.LimitPerBuyer)
	}
	return nil
}

// mysqlHolds reads, for each (SKU, buyer) of keys, the units its orders
// hold in MySQL (reserved or confirmed), in batches.
func (a Auditor) mysqlHolds(ctx context.Context, keys map[[2]string]int64) (map[[2]string]int64, error) {
	all := make([][2]string, 0, len(keys))
	for key := range keys {
		all = append(all, key)
	}
	out := make(map[[2]string]int64, len(all))
	const batch = 500
	for start := 0; start < len(all); start += batch {
		part := all[start:min(start+batch, len(all))]
		args := make([]any, 0, 2*len(part))
		for _, key := range part {
			args = append(args, key[0], key[1])
		}
		rows, err := a.DB.QueryContext(ctx, "SELECT sku, buyer, SUM(qty) FROM orders WHERE state IN ('reserved','confirmed') AND (sku, buyer) IN ((?,?)"+
			strings.Repeat(",(?,?)", len(part)-1)+") GROUP BY sku, buyer", args...)
		if err != nil {
			return nil, fmt.Errorf("audit: per-buyer limit: %w", err)
		}
		for rows.Next() {
			var key [2]string
			var n int64
			if err := rows.Scan(&key[0], &key[1], &n); err != nil {
				rows.Close()
				return nil, fmt.Errorf("audit: per-buyer limit: %w", err)
			}
			out[key] = n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("audit: per-buyer limit: %w", err)
		}
	}
	return out, nil
}
