// Package capture turns what an agent does into checkpoints: it follows the
// agent's workdir (watch, gitwatch), transcripts, handoff files and work
// snapshots, feeds what it sees to the agent's automatic checkpoint policy,
// and writes the policy's checkpoints into the residency.
package capture
