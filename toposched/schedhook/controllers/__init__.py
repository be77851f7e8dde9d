"""Background controllers of schedhook: lift topology-order gates, remediate NUMA rejections.

Each has a pure decision module and a loop that reads and writes through the API.
"""
