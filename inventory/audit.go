package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// SKUAudit is the audit of one SKU. All unit figures are counted from the
// stores, never taken from the strategy.
type SKUAudit struct {
	SKU            string `json:"sku"`
	Total          int64  `json:"total"`
	Available      int64  `json:"available"`
	Occupied       int64  `json:"occupied"`
	Sold           int64  `json:"sold"`
	ConfirmedUnits int64  `json:"confirmed_units"`
	ReservedUnits  int64  `json:"reserved_units"`
	OversoldUnits  int64  `json:"oversold_units"`
	LeakedUnits    int64  `json:"leaked_units"`
	// Redis figures, present only when the strategy keeps stock in Redis.
	Redis      *Stock `json:"redis,omitempty"`
	DriftUnits int64  `json:"drift_units"`
}

// Audit is the auditor's verdict on a run.
type Audit struct {
	ConfirmedUnits      int64      `json:"confirmed_units"`
	OversoldUnits       int64      `json:"oversold_units"`
	OversellRate        float64    `json:"oversell_rate"`
	LeakedUnits         int64      `json:"leaked_units"`
	InvariantViolations int        `json:"invariant_violations"`
	LostAcks            int        `json:"lost_acks"`
	CancelAckViolations int        `json:"cancel_ack_violations"`
	DriftUnits          int64      `json:"drift_units"`
	Violations          []string   `json:"violations,omitempty"`
	SKUs                []SKUAudit `json:"skus"`
}

// maxViolationTexts caps the violation descriptions kept in an Audit.
const maxViolationTexts = 20

// Auditor grades a run by reading MySQL (and Redis, when rdb is not nil)
// directly. It is independent of every strategy: it knows only the shared
// layout. It is safe for concurrent use.
type Auditor struct {
	DB    *sql.DB
	Redis redis.UniversalClient
}

// Ack is what a client was told about an order: State is StateConfirmed
// (Confirm returned nil) or StateCancelled (Cancel returned nil).
type Ack struct {
	OrderID string
	State   OrderState
}

// Audit reads the final state and checks it against acks, what clients were
// told. Call it after the strategy's Settle.
func (a Auditor) Audit(ctx context.Context, acks []Ack) (Audit, error) {
	var out Audit
	rows, err := a.DB.QueryContext(ctx, `
		SELECT i.sku, i.total, i.available, i.occupied, i.sold,
		       COALESCE(SUM(CASE WHEN o.state='confirmed' THEN o.qty END),0),
		       COALESCE(SUM(CASE WHEN o.state='reserved' THEN o.qty END),0)
		FROM inventory i LEFT JOIN orders o ON o.sku = i.sku
		GROUP BY i.sku, i.total, i.available, i.occupied, i.sold
		ORDER BY i.sku`)
	if err != nil {
		return out, fmt.Errorf("audit: read inventory: %w", err)
	}
	for rows.Next() {
		var s SKUAudit
		if err := rows.Scan(&s.SKU, &s.Total, &s.Available, &s.Occupied, &s.Sold, &s.ConfirmedUnits, &s.ReservedUnits); err != nil {
			rows.Close()
			return out, fmt.Errorf("audit: scan inventory: %w", err)
		}
		out.SKUs = append(out.SKUs, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("audit: read inventory: %w", err)
	}

	violate := func(format string, args ...any) {
		out.InvariantViolations++
		if len(out.Violations) < maxViolationTexts {
			out.Violations = append(out.Violations, fmt.Sprintf(format, args...))
		}
	}
	for i := range out.SKUs {
		s := &out.SKUs[i]
		if s.ConfirmedUnits > s.Total {
			s.OversoldUnits = s.ConfirmedUnits - s.Total
		}
		s.LeakedUnits = max(0, s.Total-s.Available-s.ReservedUnits-s.ConfirmedUnits)
		checkStock(violate, "mysql", Stock{SKU: s.SKU, Total: s.Total, Available: s.Available, Occupied: s.Occupied, Sold: s.Sold})
		if s.Sold != s.ConfirmedUnits {
			violate("mysql %s: sold %d != confirmed orders %d", s.SKU, s.Sold, s.ConfirmedUnits)
		}
		if s.Occupied != s.ReservedUnits {
			violate("mysql %s: occupied %d != reserved orders %d", s.SKU, s.Occupied, s.ReservedUnits)
		}
		if a.Redis != nil {
			if err := a.auditRedis(ctx, s, violate); err != nil {
				return out, err
			}
		}
		out.ConfirmedUnits += s.ConfirmedUnits
		out.OversoldUnits += s.OversoldUnits
		out.LeakedUnits += s.LeakedUnits
		out.DriftUnits += s.DriftUnits
	}
	if out.ConfirmedUnits > 0 {
		out.OversellRate = float64(out.OversoldUnits) / float64(out.ConfirmedUnits)
	}
	if err := a.checkAcks(ctx, &out, acks); err != nil {
		return out, err
	}
	return out, nil
}

func checkStock(violate func(string, ...any), store string, s Stock) {
	if s.Available < 0 || s.Occupied < 0 || s.Sold < 0 {
		violate("%s %s: negative stock (available %d, occupied %d, sold %d)", store, s.SKU, s.Available, s.Occupied, s.Sold)
	}
	if s.Available+s.Occupied+s.Sold != s.Total {
		violate("%s %s: available %d + occupied %d + sold %d != total %d", store, s.SKU, s.Available, s.Occupied, s.Sold, s.Total)
	}
}

// auditRedis compares a SKU's Redis stock hash, when there is one, with its
// live reservations and with MySQL.
func (a Auditor) auditRedis(ctx context.Context, s *SKUAudit, violate func(string, ...any)) error {
	h, err := a.Redis.HGetAll(ctx, RedisStockKey(s.SKU)).Result()
	if err != nil {
		return fmt.Errorf("audit: redis stock %s: %w", s.SKU, err)
	}
	if len(h) == 0 {
		return nil
	}
	r := Stock{SKU: s.SKU}
	for name, dst := range map[string]*int64{"total": &r.Total, "available": &r.Available, "occupied": &r.Occupied, "sold": &r.Sold} {
		if *dst, err = strconv.ParseInt(h[name], 10, 64); err != nil {
			return fmt.Errorf("audit: redis stock %s field %s=%q: %w", s.SKU, name, h[name], err)
		}
	}
	s.Redis = &r
	checkStock(violate, "redis", r)
	ids, err := a.Redis.ZRange(ctx, RedisLiveKey(s.SKU), 0, -1).Result()
	if err != nil {
		return fmt.Errorf("audit: redis live %s: %w", s.SKU, err)
	}
	var live int64
	for _, id := range ids {
		v, err := a.Redis.HMGet(ctx, RedisReservationKey(s.SKU, id), "qty", "state").Result()
		if err != nil {
			return fmt.Errorf("audit: redis reservation %s: %w", id, err)
		}
		if st, _ := v[1].(string); st == string(StateReserved) {
			q, _ := v[0].(string)
			n, _ := strconv.ParseInt(q, 10, 64)
			live += n
		}
	}
	if r.Occupied != live {
		violate("redis %s: occupied %d != live reservations %d", s.SKU, r.Occupied, live)
	}
	s.DriftUnits = abs(r.Sold-s.Sold) + abs((r.Available+r.Occupied)-(s.Available+s.Occupied))
	return nil
}

// checkAcks counts acknowledged outcomes that the orders table contradicts.
func (a Auditor) checkAcks(ctx context.Context, out *Audit, acks []Ack) error {
	byID := map[string][]OrderState{}
	ids := make([]string, 0, len(acks))
	for _, ack := range acks {
		if _, ok := byID[ack.OrderID]; !ok {
			ids = append(ids, ack.OrderID)
		}
		byID[ack.OrderID] = append(byID[ack.OrderID], ack.State)
	}
	sort.Strings(ids)
	const batch = 500
	for start := 0; start < len(ids); start += batch {
		part := ids[start:min(start+batch, len(ids))]
		args := make([]any, len(part))
		q := make([]byte, 0, 2*len(part))
		for i, id := range part {
			args[i] = id
			if i > 0 {
				q = append(q, ',')
			}
			q = append(q, '?')
		}
		rows, err := a.DB.QueryContext(ctx, "SELECT order_id, state FROM orders WHERE order_id IN ("+string(q)+")", args...)
		if err != nil {
			return fmt.Errorf("audit: read acked orders: %w", err)
		}
		states := make(map[string]OrderState, len(part))
		for rows.Next() {
			var id string
			var st OrderState
			if err := rows.Scan(&id, &st); err != nil {
				rows.Close()
				return fmt.Errorf("audit: scan orders: %w", err)
			}
			states[id] = st
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("audit: read acked orders: %w", err)
		}
		for _, id := range part {
			for _, st := range byID[id] {
				switch st {
				case StateConfirmed:
					if states[id] != StateConfirmed {
						out.LostAcks++
					}
				case StateCancelled:
					if states[id] == StateConfirmed {
						out.CancelAckViolations++
					}
				}
			}
		}
	}
	return nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
