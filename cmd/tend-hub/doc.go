// Command tend-hub is the fleet's hub: it takes the status reports
// tend agents post, keeps each device's state and its part in each
// release in SQLite or PostgreSQL, answers the brakes' verdicts, and
// serves the fleet page, JSON and metrics (see The hub in DESIGN.md).
// Its subcommands manage its database: tend-hub token create|revoke,
// tend-hub device reset. It links none of the agent's node code.
package main
