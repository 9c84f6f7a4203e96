from tolk.cli import main

main()
