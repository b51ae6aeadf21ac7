"""The report page: one self-contained HTML file per target (``python -m scaling report``).

``page`` turns rows into HTML (pure), ``history`` turns stored samples and simulation results
into those rows, ``cli`` reads the tables and writes the file.
"""
