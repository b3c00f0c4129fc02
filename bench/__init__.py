"""reminder-bridge benchmarks: each scenario runs the proxy as a real process against a real peer
on this machine, with a direct baseline measured in the same run, alternating."""
