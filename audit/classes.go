package audit

import (
	"reflect"
	"strings"
)

// Severity says what a class's count above zero means for a run.
type Severity int

const (
	// Unsafe: the stores broke a rule (units sold twice, lost, an ack the
	// stores contradict); the run is UNSAFE and ranks after every clean one.
	Unsafe Severity = iota
	// Warn: worth a reader's attention, but no rule of the stores broke.
	Warn
)

// String is the severity's word in reports: "UNSAFE" or "warn".
func (s Severity) String() string {
	if s == Unsafe {
		return "UNSAFE"
	}
	return "warn"
}

// Class is one kind of anomaly the auditor counts. Its count lives in the
// Audit field whose JSON key is Key; everything that lists, sums, compares
// or renders anomalies iterates Classes, so adding a class is one row here,
// one field of Audit and its check.
type Class struct {
	// Key is the count's JSON key in an audit (results.json runs[].audit).
	Key string
	// Title heads the class's column in tables.
	Title string
	// Unit is what the count counts: "units" of stock, or "count" of
	// events (orders, reservations, broken rules).
	Unit string
	// Severity says whether a count above zero makes a run UNSAFE.
	Severity Severity
	// Headline gives the class a column of its own in the headline table;
	// the others are summed there under "other anomalies".
	Headline bool
	// Counted says in one sentence how the auditor counts it.
	Counted string
	// RateKey and RateTitle, when set, name the class's rate (its count
	// over the confirmed units: Audit.OversellRate), shown beside it.
	RateKey, RateTitle string
	field              []int // index of the Audit field, from Key
}

// Classes is the one table of anomaly classes, in the order every table
// shows them: the headline's first (oversold units lead), then the rest.
// A missing Redis stock hash is not a class of its own: it is counted as an
// invariant violation already (and apart, as missing_redis_stock).
var Classes = withFields([]Class{
	{Key: "oversold_units", Title: "oversold units", Unit: "units", Headline: true,
		Counted:   "confirmed units beyond the stock the harness put in (initial + restocks it issued), per SKU",
		RateKey:   "oversell_rate",
		RateTitle: "oversell %"},
	{Key: "leaked_units", Title: "leaked units", Unit: "units", Headline: true,
		Counted: "ledger units neither available, held by a live reservation, nor sold"},
	{Key: "lost_acks", Title: "lost acks", Unit: "count", Headline: true,
		Counted: "confirm acks whose order is neither confirmed nor refunded in MySQL"},
	{Key: "cancel_ack_violations", Title: "cancel-ack violations", Unit: "count", Headline: true,
		Counted: "cancel acks whose order ended confirmed or refunded, or is still reserved"},
	{Key: "invariant_violations", Title: "invariant violations", Unit: "count", Headline: true,
		Counted: "broken rules of either store: available+occupied+sold != total, negative stock, sold != confirmed orders, occupied != live reservations, a missing Redis stock hash, a cluster node that disagrees"},
	{Key: "drift_units", Title: "drift units", Unit: "units", Headline: true,
		Counted: "per field, |Redis - what MySQL says Redis should hold|, summed"},
	{Key: "phantom_units", Title: "phantom units", Unit: "units",
		Counted: "units held (available + reserved + sold) beyond every ledger"},
	{Key: "over_limit_units", Title: "over-limit units", Unit: "units",
		Counted: "units a buyer holds of a SKU (its orders reserved or confirmed in MySQL, and its live Redis reservations MySQL has no order for) beyond the per-buyer limit, summed over buyers; 0 without a limit"},
	{Key: "reserve_ack_violations", Title: "reserve-ack violations", Unit: "count",
		Counted: "reserve acks for which no store holds a reservation or a decision"},
	{Key: "refused_after_reserve", Title: "refused after reserve", Unit: "count",
		Counted: "confirms refused after the reserve succeeded: for lack of stock, as an unknown order, or as cancelled or expired before the deadline"},
	{Key: "orphan_reservations", Title: "orphan reservations", Unit: "count",
		Counted: "Redis reservations MySQL does not hold as reserved, and MySQL reservations Redis does not hold"},
	{Key: "stale_reservations", Title: "stale reservations", Unit: "count",
		Counted: "live reservations whose deadline passed before settle began"},
	{Key: "probe_violations", Title: "mid-run violations", Unit: "count",
		Counted: "snapshots taken a few times a second during load in which a store broke a rule that must hold at every instant: a negative field, MySQL available+occupied+sold != total or total != initial + restock journal, a Redis field outside 0..total (audit.probe: first, worst, last)"},
	{Key: "over_released_units", Title: "over-released units", Unit: "units",
		Counted: "units taken off sold beyond what the orders account for (confirmed orders' units − sold, per SKU, where positive): a refund released twice, or a cancel and a refund of one order both releasing it"},
	{Key: "refund_ack_violations", Title: "refund-ack violations", Unit: "count",
		Counted: "refund acks whose order is not refunded in MySQL (lost, or it ended cancelled or expired)"},
	{Key: "unsold_units", Title: "unsold units", Unit: "units", Severity: Warn, Headline: true,
		Counted: "units of a flash sale left unsold while buyers were turned away (refused, shed or timed out): stock − units the clients were told they bought, counted by the harness; a sale that did not sell out ranks after those that did"},
})

// withFields finds each class's Audit field by its JSON key. A key with no
// field leaves the class reading 0; TestClassesHaveFields catches it.
func withFields(cs []Class) []Class {
	t := reflect.TypeFor[Audit]()
	for i := range cs {
		for j := 0; j < t.NumField(); j++ {
			if tag, _, _ := strings.Cut(t.Field(j).Tag.Get("json"), ","); tag == cs[i].Key {
				cs[i].field = t.Field(j).Index
			}
		}
	}
	return cs
}

// Of is the class's count in a.
func (c Class) Of(a Audit) int64 {
	if c.field == nil {
		return 0
	}
	v := reflect.ValueOf(a).FieldByIndex(c.field)
	if v.CanInt() {
		return v.Int()
	}
	return 0
}

// add adds n to the class's count in a.
func (c Class) add(a *Audit, n int64) {
	if c.field == nil {
		return
	}
	v := reflect.ValueOf(a).Elem().FieldByIndex(c.field)
	v.SetInt(v.Int() + n)
}

// ClassOf returns the class with the given JSON key.
func ClassOf(key string) (Class, bool) {
	for _, c := range Classes {
		if c.Key == key {
			return c, true
		}
	}
	return Class{}, false
}

// HeadlineClasses are the classes with a headline column, in table order.
func HeadlineClasses() []Class { return filter(true) }

// OtherClasses are the classes summed under "other anomalies".
func OtherClasses() []Class { return filter(false) }

func filter(headline bool) []Class {
	var out []Class
	for _, c := range Classes {
		if c.Headline == headline {
			out = append(out, c)
		}
	}
	return out
}

// Count is the sum of the UNSAFE classes' counts of a, computed from the
// counts themselves (not the stored Anomalies figure, so audits read from
// older files count the same way). Zero means the auditor found nothing
// that makes a run unsafe.
func (a Audit) Count() int64 { return a.sum(Unsafe) }

// Warnings is the sum of the warn-only classes' counts of a.
func (a Audit) Warnings() int64 { return a.sum(Warn) }

func (a Audit) sum(s Severity) int64 {
	var n int64
	for _, c := range Classes {
		if c.Severity == s {
			n += c.Of(a)
		}
	}
	return n
}

// Recount sets Anomalies from the classes' counts; call it after changing
// any count.
func (a *Audit) Recount() { a.Anomalies = a.Count() }

// AddViolations counts broken rules found outside the auditor's own pass
// (a replicated cluster's nodes that disagree): each text is one invariant
// violation.
func (a *Audit) AddViolations(texts []string) {
	c, _ := ClassOf("invariant_violations")
	c.add(a, int64(len(texts)))
	a.Violations = append(a.Violations, texts...)
	a.Recount()
}

// Repaired is what changed between two audits of one run, per anomaly
// class and in total ("anomalies"): positive where the later audit found
// less (settle repaired it), negative where it found more. Zero figures
// are left out.
func Repaired(before, after Audit) map[string]int64 {
	out := map[string]int64{}
	for _, c := range Classes {
		if d := c.Of(before) - c.Of(after); d != 0 {
			out[c.Key] = d
		}
	}
	if d := before.Count() - after.Count(); d != 0 {
		out["anomalies"] = d
	}
	return out
}

// UnsafeTitles lists the titles of the UNSAFE classes as prose ("a, b or
// c"), for reports that say what makes a run unsafe.
func UnsafeTitles() string {
	var ts []string
	for _, c := range Classes {
		if c.Severity == Unsafe {
			ts = append(ts, c.Title)
		}
	}
	if len(ts) < 2 {
		return strings.Join(ts, "")
	}
	return strings.Join(ts[:len(ts)-1], ", ") + " or " + ts[len(ts)-1]
}
