package agent

import (
	"context"
	"testing"
	"time"
)

// A tool call's time is believed only within ToolTimeSlack before its
// receipt by the daemon's clock, and never after it; a spooled event's
// receipt is the one WithReceipt gives.
func TestToolTimeIsTheDaemonsClock(t *testing.T) {
	receipt := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		at, want time.Time
	}{
		{time.Time{}, receipt},
		{time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), receipt.Add(-ToolTimeSlack)},
		{receipt.Add(-time.Second), receipt.Add(-time.Second)},
		{receipt.Add(time.Hour), receipt},
	} {
		if got := toolTime(c.at, receipt); !got.Equal(c.want) {
			t.Errorf("toolTime(%v) = %v, want %v", c.at, got, c.want)
		}
	}
	if got := receiptOf(WithReceipt(context.Background(), receipt)); !got.Equal(receipt) {
		t.Errorf("receiptOf = %v, want %v", got, receipt)
	}
	if got := receiptOf(context.Background()); time.Since(got) > time.Minute {
		t.Errorf("receiptOf without a receipt = %v, want now", got)
	}
}
