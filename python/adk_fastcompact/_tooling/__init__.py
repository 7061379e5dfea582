"""The command line's tooling: `bench`, `audit` and what they run on.

Nothing in the runtime (`install()`, the drop-ins, exact mode) imports this
package; it may import the runtime. rich, which it draws with, comes with
the `cli` extra.
"""
