package tools_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/visorhq/visor/tools"
)

type weatherIn struct {
	City  string `json:"city" jsonschema_description:"City name, e.g. Lisbon."`
	Units string `json:"units,omitempty" jsonschema:"enum=metric,enum=imperial,default=metric"`
}

type weatherOut struct {
	City string  `json:"city"`
	Temp float64 `json:"temp"`
	Unit string  `json:"unit"`
}

func ExampleNew() {
	weather := tools.New("weather", "Current temperature in a city.",
		func(ctx context.Context, in weatherIn) (weatherOut, error) {
			if in.Units == "imperial" {
				return weatherOut{in.City, 70, "F"}, nil
			}
			return weatherOut{in.City, 21, "C"}, nil
		}, tools.Parallel())

	reg := tools.NewRegistry()
	if err := reg.Register(weather); err != nil {
		panic(err)
	}
	fmt.Println(string(reg.Specs()[0].Parameters))

	// Defaults from the struct tags are filled in before the call.
	fmt.Println(reg.Call(context.Background(), "weather", json.RawMessage(`{"city":"Lisbon"}`)).Text)

	// Mistakes come back as results the model can act on.
	res := reg.Call(context.Background(), "weather", json.RawMessage(`{"city":"Lisbon","units":"kelvin"}`))
	fmt.Println(res.IsError, res.Text)
	// Output:
	// {"properties":{"city":{"type":"string","description":"City name, e.g. Lisbon."},"units":{"type":"string","enum":["metric","imperial"],"default":"metric"}},"additionalProperties":false,"type":"object","required":["city"]}
	// {"city":"Lisbon","temp":21,"unit":"C"}
	// true Invalid arguments for tool "weather": field "units": value "kelvin" is not allowed; expected one of ["metric","imperial"].
	// Parameters of "weather":
	// - city (string, required): City name, e.g. Lisbon.
	// - units (string, one of ["metric","imperial"], default "metric")
}
