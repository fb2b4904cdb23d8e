"""What people read: the terminal results, the HTML report, plots."""
