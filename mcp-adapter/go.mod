module github.com/bmcis/knowledge/mcp-adapter

go 1.26.0

replace github.com/bmcis/knowledge => ..

replace github.com/bmcis/knowledge/gen => ../gen
