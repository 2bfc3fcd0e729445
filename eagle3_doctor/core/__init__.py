"""The vocabulary every layer speaks: errors, capture points (taps), findings and their explanations,
interval statistics and typed JSON. Imports nothing else of the package."""
