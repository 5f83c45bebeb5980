package results

import "testing"

func TestAggregates(t *testing.T) {
	run := func(name string, tps, p99 float64) Run {
		return Run{Strategy: name, Scenario: "s", TPS: tps, LatencyMS: map[string]Percentiles{"flow": {P99: p99}}}
	}
	got := Aggregates(&Results{Runs: []Run{run("a", 10, 5), run("b", 1, 1), run("a", 30, 1), run("a", 20, 3), run("b", 3, 2)}})
	if len(got) != 2 || got[0].Strategy != "a" || got[1].Strategy != "b" {
		t.Fatalf("order or grouping wrong: %+v", got)
	}
	if got[0].TPS != (Spread{Min: 10, Median: 20, Max: 30}) || got[0].FlowP99MS.Median != 3 {
		t.Fatalf("a: %+v", got[0])
	}
	if got[1].TPS.Median != 2 || got[1].Repeats != 2 {
		t.Fatalf("b (even count takes the mean of the middle two): %+v", got[1])
	}
}
