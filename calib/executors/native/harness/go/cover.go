// calib native harness (Go), x's coverage build: function.go is the copy `go tool cover -mode=count
// -var=calibCover` wrote, whose counters are the array calibCover.Count (one per block of statements).
// After each input the harness sends a copy of them: little-endian uint32s, in block order
// (calib/executors/native/coverage_go.py; read back by report.go in the build sandbox).
package main

func calibCounts() []byte {
	out := make([]byte, 0, 4*len(calibCover.Count))
	for _, c := range calibCover.Count {
		out = append(out, byte(c), byte(c>>8), byte(c>>16), byte(c>>24))
	}
	return out
}
