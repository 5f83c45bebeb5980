package results

// Flash is a one-SKU sale measured as a sale (runs of the fixed scenarios):
// how long until it sold out, what was sold, what became of every buyer,
// how fast the refused heard so, whether the earliest buyers won, and what
// stayed unsold while buyers were turned away. Times are from the start of
// load; the figures count what the clients were told (the audit grades the
// stores).
type Flash struct {
	Stock int64 `json:"stock"`
	// Buyers is how many buyers arrived (started their journey).
	Buyers int64 `json:"buyers"`
	// Reserved and Sold count acknowledged reserves and confirms.
	Reserved int64 `json:"reserved"`
	Sold     int64 `json:"sold"`
	// SoldOut says Sold reached Stock.
	SoldOut bool `json:"sold_out"`
	// FirstReserveMS is when the first reserve was acknowledged;
	// ReservedOutMS the time from it to the last acknowledged reserve (the
	// last unit reserved), SoldOutMS from it to the last acknowledged
	// confirm (the last unit sold).
	FirstReserveMS float64 `json:"first_reserve_ms"`
	ReservedOutMS  float64 `json:"reserved_out_ms"`
	SoldOutMS      float64 `json:"sold_out_ms"`
	// What became of each buyer: served (paid), refused (out of stock, at
	// reserve or at confirm), shed (the service was busy), timed out (a
	// call timed out or its outcome is unknown), abandoned (reserved and
	// never meant to pay), failed (any other error).
	Served    int64 `json:"served"`
	Refused   int64 `json:"refused"`
	Shed      int64 `json:"shed"`
	TimedOut  int64 `json:"timed_out"`
	Abandoned int64 `json:"abandoned"`
	Failed    int64 `json:"failed"`
	// Limited counts buyers' tries refused for the per-buyer limit (the
	// buyer already held its allowance): neither served nor turned away.
	Limited int64 `json:"limited,omitempty"`
	// LateStarts counts buyers who started more than 10 ms after their
	// scheduled arrival (the harness could not keep up; k6's dropped
	// iterations, except that they still ran).
	LateStarts int64 `json:"late_starts"`
	// Reserve latency by answer: refusals (out of stock), winners (ok) and
	// sheds (busy), each its own distribution.
	RefusalMS Percentiles `json:"refusal_ms"`
	WinnerMS  Percentiles `json:"winner_ms"`
	ShedMS    Percentiles `json:"shed_ms"`
	// Fairness: of the first Stock buyers to arrive who meant to pay
	// (EarlyBuyers), EarlyWon bought; FairPct = 100·EarlyWon/EarlyBuyers
	// (100: first come, first served).
	EarlyBuyers int64   `json:"early_buyers"`
	EarlyWon    int64   `json:"early_won"`
	FairPct     float64 `json:"fair_pct"`
	// TurnedAway is the buyers refused, shed or timed out; UnsoldUnits
	// (undersell, the mirror of oversell) is Stock − Sold when any buyer
	// was turned away, else 0: units left on the shelf while buyers who
	// wanted them went home.
	TurnedAway  int64 `json:"turned_away"`
	UnsoldUnits int64 `json:"unsold_units"`
	// Timeline is the sale in BucketMS buckets from the start of load.
	BucketMS int           `json:"bucket_ms"`
	Timeline []FlashBucket `json:"timeline,omitempty"`
}

// FlashBucket is one bucket of a sale's timeline; events are placed at the
// moment the client got the answer.
type FlashBucket struct {
	AtMS int `json:"at_ms"`
	// UnitsLeft is Stock minus acknowledged reserves plus acknowledged
	// cancels, at the bucket's end (negative when a scheme let more
	// buyers through than it had units).
	UnitsLeft int64 `json:"units_left"`
	Reserves  int64 `json:"reserves"`
	Refusals  int64 `json:"refusals"`
	Sheds     int64 `json:"sheds"`
	Timeouts  int64 `json:"timeouts"`
	Sold      int64 `json:"sold"`
}

// Service is the service model in front of the strategy instance: at most
// Inflight requests in the strategy, at most Queue new requests waiting,
// the rest shed as busy. Inflight 0: no service model.
type Service struct {
	Inflight  int   `json:"inflight"`
	Queue     int   `json:"queue"`
	Shed      int64 `json:"shed"`
	PeakQueue int   `json:"peak_queue"`
	// ClientRetries counts the buyers' retries of calls that were shed,
	// timed out or had an unknown outcome (config client_retry).
	ClientRetries int64 `json:"client_retries"`
}
