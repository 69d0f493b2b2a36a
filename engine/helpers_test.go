package engine_test

import (
	"encoding/json"
	"time"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func nanotime() int64 { return time.Now().UnixNano() }
