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
	// Ledger is the stock the harness put in: initial + restocks it issued
	// (without a ledger, the MySQL total).
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
	// Redis figures, present only when the strategy keeps stock in Redis.
	Redis *RedisStock `json:"redis,omitempty"`
	// RedisReservedUnits are the units of live Redis reservations.
	RedisReservedUnits int64       `json:"redis_reserved_units"`
	Drift              *FieldDrift `json:"drift,omitempty"`
	DriftUnits         int64       `json:"drift_units"`
	OrphanReservations int         `json:"orphan_reservations"`
	StaleReservations  int         `json:"stale_reservations"`
}

// Audit is the auditor's verdict on the stores at one moment. Each anomaly
// count is the field of one row of Classes (by its JSON key).
type Audit struct {
	ConfirmedUnits int64   `json:"confirmed_units"`
	OversoldUnits  int64   `json:"oversold_units"`
	OversellRate   float64 `json:"oversell_rate"`
	LeakedUnits    int64   `json:"leaked_units"`
	PhantomUnits   int64   `json:"phantom_units"`
	// InvariantViolations counts broken rules of either store (a missing
	// Redis stock hash is one).
	InvariantViolations int `json:"invariant_violations"`
	// MissingRedisStock counts SKUs without a Redis stock hash.
	MissingRedisStock int `json:"missing_redis_stock"`
	// LostAcks counts confirm acks whose order is not confirmed.
	LostAcks int `json:"lost_acks"`
	// ReserveAckViolations counts reserve acks no store holds a
	// reservation (or a decision) for.
	ReserveAckViolations int `json:"reserve_ack_violations"`
	// CancelAckViolations counts cancel acks whose order is confirmed or
	// still reserved.
	CancelAckViolations int `json:"cancel_ack_violations"`
	// RefusedAfterReserve counts confirms refused for lack of stock after
	// a successful reserve.
	RefusedAfterReserve int   `json:"refused_after_reserve"`
	DriftUnits          int64 `json:"drift_units"`
	// OrphanReservations are Redis reservations holding units for an order
	// MySQL does not hold as reserved (none, or already decided), and MySQL
	// reservations Redis does not hold.
	OrphanReservations int `json:"orphan_reservations"`
	// StaleReservations are live Redis reservations whose deadline passed
	// before the audit's StaleBefore.
	StaleReservations int `json:"stale_reservations"`
	// Anomalies is the sum of the UNSAFE classes' counts (Classes, units
	// and counts alike): zero means the auditor found nothing wrong.
	Anomalies  int64      `json:"anomalies"`
	Violations []string   `json:"violations,omitempty"`
	SKUs       []SKUAudit `json:"skus"`
}

// maxViolationTexts caps the violation descriptions kept in an Audit.
const maxViolationTexts = 20

// Auditor grades the stores by reading MySQL (and Redis, when Redis is not
// nil) directly. It is independent of every strategy: it knows only the
// shared layout. It only reads; it is safe for concurrent use, and an audit
// is meaningful when no operation is in flight.
type Auditor struct {
	DB *sql.DB
	// Redis is the Redis of a strategy that keeps stock there; nil when the
	// strategy keeps none (then Redis is not checked at all).
	Redis redis.UniversalClient
	// Ledger is the stock the harness put in per SKU (initial + restocks it
	// issued): the total every store must show. Nil: the MySQL total is
	// taken as the ledger (the audit command, on stores it did not fill).
	Ledger map[string]int64
	// RedisReservations says reservations live only in Redis until decided
	// (lua-tcc's TCC Try): a live Redis reservation then needs no MySQL
	// order, and MySQL's available includes the units it holds.
	RedisReservations bool
	// StaleBefore, when set, makes a live Redis reservation whose deadline
	// is before it an anomaly (an audit after Settle passes the time Settle
	// began: every reservation due then should have been released).
	StaleBefore time.Time
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

// Audit reads the stores and checks them against the ledger and against
// acks, what clients were told.
func (a Auditor) Audit(ctx context.Context, acks []inventory.Ack) (Audit, error) {
	var out Audit
	k := sink{&out}
	rows, err := a.DB.QueryContext(ctx, `
		SELECT i.sku, i.total, i.available, i.occupied, i.sold,
		       COALESCE((SELECT SUM(CASE WHEN o.state='confirmed' THEN o.qty END) FROM orders o WHERE o.sku=i.sku),0),
		       COALESCE((SELECT SUM(CASE WHEN o.state='reserved' THEN o.qty END) FROM orders o WHERE o.sku=i.sku),0),
		       COALESCE((SELECT SUM(CASE WHEN e.kind='reserve' THEN -e.qty WHEN e.kind='release' THEN e.qty ELSE 0 END) FROM outbox e WHERE e.sku=i.sku AND e.applied=0),0),
		       COALESCE((SELECT SUM(CASE WHEN e.kind='reserve' THEN e.qty ELSE -e.qty END) FROM outbox e WHERE e.sku=i.sku AND e.applied=0),0),
		       COALESCE((SELECT SUM(CASE WHEN e.kind='confirm' THEN e.qty ELSE 0 END) FROM outbox e WHERE e.sku=i.sku AND e.applied=0),0),
		       (SELECT COUNT(*) FROM outbox e WHERE e.sku=i.sku AND e.applied=0)
		FROM inventory i ORDER BY i.sku`)
	if err != nil {
		return out, fmt.Errorf("audit: read inventory: %w", err)
	}
	for rows.Next() {
		var s SKUAudit
		var da, do, ds int64
		if err := rows.Scan(&s.SKU, &s.Total, &s.Available, &s.Occupied, &s.Sold, &s.ConfirmedUnits, &s.ReservedUnits,
			&da, &do, &ds, &s.PendingEvents); err != nil {
			rows.Close()
			return out, fmt.Errorf("audit: scan inventory: %w", err)
		}
		s.Available, s.Occupied, s.Sold = s.Available+da, s.Occupied+do, s.Sold+ds
		out.SKUs = append(out.SKUs, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("audit: read inventory: %w", err)
	}
	if err := a.addLayout(ctx, out.SKUs, k); err != nil {
		return out, err
	}
	for sku := range a.Ledger {
		if !containsSKU(out.SKUs, sku) {
			k.violate("mysql %s: no inventory row for a SKU the harness stocked", sku)
		}
	}

	for i := range out.SKUs {
		s := &out.SKUs[i]
		s.Ledger = s.Total
		if l, ok := a.Ledger[s.SKU]; ok {
			s.Ledger = l
			if s.Total != l {
				k.violate("mysql %s: total %d != ledger %d (initial + restocks issued)", s.SKU, s.Total, l)
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
		held := s.Available + s.ReservedUnits + s.ConfirmedUnits
		s.LeakedUnits = max(0, s.Ledger-held)
		s.PhantomUnits = max(0, held-max(s.Ledger, s.ConfirmedUnits))
		if a.Redis != nil {
			if err := a.auditRedis(ctx, s, k); err != nil {
				return out, err
			}
		}
		if s.LeakedUnits > 0 {
			k.note("%s: %d units leaked (in no available, reserved or sold count)", s.SKU, s.LeakedUnits)
		}
		if s.PhantomUnits > 0 {
			k.note("%s: %d phantom units (beyond the ledger's %d)", s.SKU, s.PhantomUnits, s.Ledger)
		}
		out.ConfirmedUnits += s.ConfirmedUnits
		out.OversoldUnits += s.OversoldUnits
		out.LeakedUnits += s.LeakedUnits
		out.PhantomUnits += s.PhantomUnits
		out.DriftUnits += s.DriftUnits
		out.OrphanReservations += s.OrphanReservations
		out.StaleReservations += s.StaleReservations
	}
	if out.ConfirmedUnits > 0 {
		out.OversellRate = float64(out.OversoldUnits) / float64(out.ConfirmedUnits)
	}
	if err := a.checkAcks(ctx, &out, k, acks); err != nil {
		return out, err
	}
	out.Recount()
	return out, nil
}

func containsSKU(s []SKUAudit, sku string) bool {
	for _, x := range s {
		if x.SKU == sku {
			return true
		}
	}
	return false
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
}

// auditRedis checks a SKU's Redis stock hash against its live reservations,
// the ledger and MySQL, field by field.
func (a Auditor) auditRedis(ctx context.Context, s *SKUAudit, k sink) error {
	h, err := a.Redis.HGetAll(ctx, inventory.RedisStockKey(s.SKU)).Result()
	if err != nil {
		return fmt.Errorf("audit: redis stock %s: %w", s.SKU, err)
	}
	if len(h) == 0 {
		k.out.MissingRedisStock++
		k.violate("redis %s: stock hash missing (every reserve fails; live data lost?)", s.SKU)
		return nil
	}
	var r RedisStock
	for name, dst := range map[string]*int64{"total": &r.Total, "available": &r.Available, "occupied": &r.Occupied, "sold": &r.Sold} {
		if *dst, err = strconv.ParseInt(h[name], 10, 64); err != nil {
			k.violate("redis %s: field %s=%q is not a number", s.SKU, name, h[name])
		}
	}
	s.Redis = &r
	checkStock(k, "redis", inventory.Stock{SKU: s.SKU, Total: r.Total, Available: r.Available, Occupied: r.Occupied, Sold: r.Sold})
	live, err := a.liveReservations(ctx, s.SKU)
	if err != nil {
		return err
	}
	states, err := a.orderStates(ctx, live)
	if err != nil {
		return err
	}
	var undecided int64 // live Redis units MySQL holds no order for
	inRedis := map[string]bool{}
	for _, res := range live {
		inRedis[res.id] = true
		s.RedisReservedUnits += res.qty
		st, known := states[res.id]
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
	if !a.RedisReservations && s.ReservedUnits > 0 {
		ids, err := a.reservedOrders(ctx, s.SKU)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if !inRedis[id] {
				s.OrphanReservations++
				k.note("mysql %s: order %s reserved, but Redis holds no reservation for it", s.SKU, id)
			}
		}
	}
	// What MySQL says Redis should hold. With reservations in Redis only,
	// MySQL's available still counts the units undecided reservations hold.
	want := RedisStock{Total: s.Total, Available: s.Available, Occupied: s.Occupied, Sold: s.Sold}
	if a.RedisReservations {
		want.Available -= undecided
		want.Occupied += undecided
	}
	d := FieldDrift{Total: r.Total - want.Total, Available: r.Available - want.Available,
		Occupied: r.Occupied - want.Occupied, Sold: r.Sold - want.Sold}
	s.DriftUnits = d.Units()
	if s.DriftUnits > 0 {
		s.Drift = &d
		k.note("redis %s: drift from MySQL total %+d available %+d occupied %+d sold %+d", s.SKU, d.Total, d.Available, d.Occupied, d.Sold)
	}
	if ph := max(0, r.Available+r.Occupied+r.Sold-max(s.Ledger, s.ConfirmedUnits)); ph > s.PhantomUnits {
		s.PhantomUnits = ph
	}
	return nil
}

// liveReservations lists a SKU's live Redis reservations (state reserved).
func (a Auditor) liveReservations(ctx context.Context, sku string) ([]redisReservation, error) {
	ids, err := a.Redis.ZRange(ctx, inventory.RedisLiveKey(sku), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("audit: redis live %s: %w", sku, err)
	}
	pipe := a.Redis.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, inventory.RedisReservationKey(sku, id), "qty", "state", "deadline")
	}
	if len(ids) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("audit: redis reservations %s: %w", sku, err)
		}
	}
	var out []redisReservation
	for i, id := range ids {
		v := cmds[i].Val()
		if st, _ := v[1].(string); st != string(inventory.StateReserved) {
			continue
		}
		q, _ := v[0].(string)
		d, _ := v[2].(string)
		n, _ := strconv.ParseInt(q, 10, 64)
		ms, _ := strconv.ParseInt(d, 10, 64)
		out = append(out, redisReservation{id: id, qty: n, deadline: time.UnixMilli(ms)})
	}
	return out, nil
}

// reservedOrders lists a SKU's orders reserved in MySQL.
func (a Auditor) reservedOrders(ctx context.Context, sku string) ([]string, error) {
	rows, err := a.DB.QueryContext(ctx, "SELECT order_id FROM orders WHERE sku=? AND state='reserved'", sku)
	if err != nil {
		return nil, fmt.Errorf("audit: reserved orders: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("audit: reserved orders: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

func (a Auditor) orderStates(ctx context.Context, live []redisReservation) (map[string]inventory.OrderState, error) {
	ids := make([]string, len(live))
	for i, r := range live {
		ids[i] = r.id
	}
	rows, err := a.orders(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]inventory.OrderState, len(rows))
	for id, o := range rows {
		out[id] = o.state
	}
	return out, nil
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

// checkAcks counts acknowledgements that the stores contradict.
func (a Auditor) checkAcks(ctx context.Context, out *Audit, k sink, acks []inventory.Ack) error {
	ids := make([]string, 0, len(acks))
	seen := map[string]bool{}
	for _, ack := range acks {
		if !seen[ack.OrderID] {
			seen[ack.OrderID] = true
			ids = append(ids, ack.OrderID)
		}
	}
	rows, err := a.orders(ctx, ids)
	if err != nil {
		return err
	}
	for _, ack := range acks {
		o, found := rows[ack.OrderID]
		switch ack.State {
		case inventory.StateConfirmed:
			if o.state != inventory.StateConfirmed {
				out.LostAcks++
				k.note("order %s: confirm acknowledged, order is %q", ack.OrderID, o.state)
			}
		case inventory.StateCancelled:
			if o.state == inventory.StateConfirmed || o.state == inventory.StateReserved {
				out.CancelAckViolations++
				k.note("order %s: cancel acknowledged, order is %s", ack.OrderID, o.state)
			}
		case inventory.AckRefused:
			out.RefusedAfterReserve++
			k.note("order %s: confirm refused for lack of stock after its reserve succeeded", ack.OrderID)
		case inventory.StateReserved:
			if found && o.qty > 0 {
				continue
			}
			held, err := a.heldInRedis(ctx, ack)
			if err != nil {
				return err
			}
			if !held {
				out.ReserveAckViolations++
				k.note("order %s: reserve acknowledged, no store holds it (mysql %q)", ack.OrderID, o.state)
			}
		}
	}
	return nil
}

// heldInRedis reports whether Redis holds a reservation record with units
// for the order (strategies whose reservations live in Redis).
func (a Auditor) heldInRedis(ctx context.Context, ack inventory.Ack) (bool, error) {
	if a.Redis == nil || !a.RedisReservations || ack.SKU == "" {
		return false, nil
	}
	v, err := a.Redis.HMGet(ctx, inventory.RedisReservationKey(ack.SKU, ack.OrderID), "qty", "state").Result()
	if err != nil {
		return false, fmt.Errorf("audit: redis reservation %s: %w", ack.OrderID, err)
	}
	q, _ := v[0].(string)
	n, _ := strconv.ParseInt(q, 10, 64)
	return n > 0, nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
