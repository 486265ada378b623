"""Run control every process needs below the I/O: errors and exit statuses with the one
``main()``, the log, secret redaction, fault injection, local workers' guards, argument parsing
and loopback binding. Beam-free; imports nothing from dataio/, transforms/, pipelines/ or
runners/ (they all import it)."""
