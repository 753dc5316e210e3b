from pgrig.cli import main

main()
