"""The tools' console scripts (setup.py ``entry_points``): each module parses flags, runs the
package's code and prints; ``bench_args`` holds what the benchmark commands share."""
