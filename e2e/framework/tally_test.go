package framework

import (
	"fmt"
	"net"
	"testing"
)

func TestFreePorts(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 20 {
		ports, err := FreePorts(4)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if p < portsFloor || p >= low {
				t.Errorf("port %d is outside [%d, %d)", p, portsFloor, low)
			}
			if seen[p] {
				t.Errorf("port %d handed out twice", p)
			}
			seen[p] = true
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				t.Errorf("port %d is not free: %v", p, err)
				continue
			}
			l.Close()
		}
	}
}
