package runner

import (
	"errors"
	"fmt"
)

// Validate returns every problem of o at once, each naming the setting
// (by its flag's name, the key a scenario file uses too), so a user fixes
// them in one go. A nil result means the options can run. The checks are
// of the typed values only; parsing a flag's text is its front end's job.
func (o Options) Validate() []error {
	var errs []error
	bad := func(cond bool, format string, args ...any) {
		if cond {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	p := o.Params
	bad(p.Stock <= 0, "--stock %d: must be positive", p.Stock)
	bad(p.Buyers <= 0, "--buyers %d: must be positive", p.Buyers)
	bad(p.Abandon < 0 || p.Abandon > 1, "--abandon %g: must be between 0 and 1", p.Abandon)
	bad(p.LimitPerBuyer < 0, "--limit-per-buyer %d: must not be negative (0: no limit)", p.LimitPerBuyer)
	bad(p.RepeatBuyers < 0 || p.RepeatBuyers > 1, "--repeat-buyers %g: must be between 0 and 1", p.RepeatBuyers)
	bad(p.RepeatTries < 2, "--repeat-tries %d: must be at least 2", p.RepeatTries)
	bad(p.TTL <= 0, "--ttl %s: must be positive", p.TTL)
	bad(p.ShortTTL <= 0, "--short-ttl %s: must be positive", p.ShortTTL)
	bad(p.Duration <= 0, "--duration %s: must be positive", p.Duration)
	bad(p.Warmup < 0, "--warmup %s: must not be negative", p.Warmup)
	bad(p.SKUs <= 0, "--skus %d: must be positive", p.SKUs)
	bad(p.Rate < 0, "--rate %g: must not be negative (0: closed loop)", p.Rate)
	bad(o.Repeat <= 0, "--repeat %d: must be positive", o.Repeat)
	bad(o.Pool <= 0, "--pool %d: must be positive", o.Pool)
	bad(o.ClientRetry < 0, "--client-retry %d: must not be negative (0: none)", o.ClientRetry)
	bad(o.Inflight < -1, "--inflight %d: must be -1 (no service model), 0 (--pool) or positive", o.Inflight)
	bad(o.Queue < 0, "--queue %d: must not be negative (0: no queue)", o.Queue)
	bad(o.CalibrateDuration < 0, "--calibrate %s: must not be negative (0: skip)", o.CalibrateDuration)
	bad(o.OpTimeout <= 0, "--op-timeout %s: must be positive", o.OpTimeout)
	bad(o.SettleTimeout < 0, "--settle-timeout %s: must not be negative (0: scale with the catalog)", o.SettleTimeout)
	bad(o.AuditTimeout < 0, "--audit-timeout %s: must not be negative (0: scale with the catalog)", o.AuditTimeout)
	s := o.Strategy
	bad(s.CASRetry != "backoff" && s.CASRetry != "immediate", "--cas-retry %q: want backoff or immediate", s.CASRetry)
	bad(s.CASMaxWait < 0, "--cas-max-wait %s: must not be negative (0: --op-timeout)", s.CASMaxWait)
	bad(s.OutboxPeriod <= 0, "--outbox-period %s: must be positive", s.OutboxPeriod)
	bad(s.ReconcilePeriod <= 0, "--reconcile-period %s: must be positive", s.ReconcilePeriod)
	bad(s.SweepPeriod <= 0, "--sweep-period %s: must be positive", s.SweepPeriod)
	bad(s.BatchMax <= 0, "--batch-max %d: must be positive (1: no coalescing)", s.BatchMax)
	bad(s.BatchWait < 0, "--batch-wait %s: must not be negative", s.BatchWait)
	bad(s.Buckets <= 0, "--buckets %d: must be positive", s.Buckets)
	bad(s.Degrade != "" && s.Degrade != "mysql", "--degrade %q: want mysql (or nothing: off)", s.Degrade)
	bad(s.DegradeTimeout < 0, "--degrade-timeout %s: must not be negative", s.DegradeTimeout)
	bad(s.SoldOutFlag < 0, "--soldout-flag %s: must not be negative (0: off)", s.SoldOutFlag)
	if len(o.Scenarios) == 0 {
		errs = append(errs, errors.New("--scenario: name at least one scenario"))
	}
	errs = append(errs, o.Service.problems(o)...)
	return errs
}
