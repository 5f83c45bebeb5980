package calibrate_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stockbench/stockbench/calibrate"
	"github.com/stockbench/stockbench/servers/servertest"
)

var env servertest.Env

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, &env)) }

// TestCalibrate: every probe measures something and the probe table is gone
// afterwards.
func TestCalibrate(t *testing.T) {
	cal, err := calibrate.Run(context.Background(), env.Endpoints, env.Conns, 8, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if cal.RedisEvalshaOps <= 0 || cal.MySQLHotUpdateOps <= 0 || cal.MySQLHotTxnOps <= 0 {
		t.Fatalf("calibration %+v", cal)
	}
	var n int
	if err := env.DB.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_name='calib_hot'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("calibration table left behind (%d, %v)", n, err)
	}
}
