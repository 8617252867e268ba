"""``python -m cookbook.learning_bench``: the bench (``learning_bench.py`` holds it)."""

from cookbook.learning_bench.learning_bench import main

if __name__ == "__main__":
    main()
