package inventory_test

import (
	"os"
	"testing"

	"github.com/stockbench/stockbench/servers/servertest"
)

var env servertest.Env

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, &env, "TestClassify")) }
