package inventory

import "database/sql/driver"

// Abandon stops renewing and drops the lock's connection without
// releasing anything, as a killed run would.
func (l *RunLock) Abandon() {
	close(l.stop)
	<-l.done
	// ErrBadConn makes database/sql close the connection, not pool it.
	_ = l.conn.Raw(func(any) error { return driver.ErrBadConn })
	l.conn.Close()
}
