module github.com/bmcis/knowledge/gateway

go 1.26.0

require (
	github.com/bmcis/knowledge v0.0.0
	github.com/bmcis/knowledge/gen v0.0.0
)

replace github.com/bmcis/knowledge => ..

replace github.com/bmcis/knowledge/gen => ../gen
